"""Writes the bad data sets of the bad-input table (tests/tools/bad_input_table_test.cc).

    write_bad_data.py OUT_DIR

OUT_DIR/corrupt (a class folder holding a PNG cut short), sizes (images of two sizes), empty
(no class folders), no-images (a class folder without images), disagree.npz (x and y of
different lengths), three.npz and five.npz (labels of 3 and of 5 classes), flat.npz (x not
an image), tokens.bin (uint16 ids 0..99).
"""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]


def png(path, width=8, height=8):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pixels = (np.arange(width * height) % 256).astype(np.uint8).reshape(height, width)
    Image.fromarray(pixels).save(path)


def at(name):
    return os.path.join(out, name)


png(at("corrupt/a/1.png"))
os.makedirs(at("corrupt/b"))
with open(at("corrupt/b/2.png"), "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n cut short")
png(at("sizes/a/1.png"))
png(at("sizes/b/2.png"), width=9)
os.makedirs(at("empty"))
png(at("no-images/a/1.png"))
os.makedirs(at("no-images/b"))
images = np.zeros((10, 1, 8, 8), np.float32)
np.savez(at("disagree.npz"), x=images, y=np.zeros(9, np.int64))
np.savez(at("three.npz"), x=images, y=np.arange(10) % 3)
np.savez(at("five.npz"), x=images, y=np.arange(10) % 5)
np.savez(at("flat.npz"), x=np.zeros((10, 64), np.float32), y=np.arange(10) % 3)
np.arange(100, dtype=np.uint16).tofile(at("tokens.bin"))
