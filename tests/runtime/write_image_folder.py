"""Writes Fashion-MNIST's IDX files as an image folder of PNG files (PIL writes them).

    write_image_folder.py IDX_DIR OUT_DIR [LIMIT]

OUT_DIR/train/CLASS/NNNNN.png and OUT_DIR/test/CLASS/NNNNN.png, one 28x28 grayscale PNG per
example: NNNNN is the example's index in its IDX file, CLASS its label and name
("0-t-shirt-top", ..., "9-ankle-boot": sorted, the folders' order is the labels'). LIMIT:
only the first LIMIT examples of each half. Reads the IDX files with numpy and gzip only.
"""
import gzip
import os
import sys

import numpy as np
from PIL import Image

CLASSES = ["t-shirt-top", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
           "sneaker", "bag", "ankle-boot"]


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    idx_dir, out = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    for half, prefix in (("train", "train"), ("test", "t10k")):
        images = idx(os.path.join(idx_dir, prefix + "-images-idx3-ubyte.gz"))[:limit]
        labels = idx(os.path.join(idx_dir, prefix + "-labels-idx1-ubyte.gz"))[:limit]
        for label, name in enumerate(CLASSES):
            os.makedirs(os.path.join(out, half, f"{label}-{name}"), exist_ok=True)
        for i, (image, label) in enumerate(zip(images, labels)):
            folder = os.path.join(out, half, f"{label}-{CLASSES[label]}")
            Image.fromarray(image, mode="L").save(os.path.join(folder, f"{i:05d}.png"))


if __name__ == "__main__":
    main()
