#!/usr/bin/python3
"""`tandem predict` against the run that trained the checkpoint and against PyTorch.

LeNet trains one short epoch on Fashion-MNIST (`tandem train --checkpoint`); `tandem
predict` runs that checkpoint over the same test images training evaluated, on three
devices (an uneven split of each batch, and a padded last batch). Its printed accuracy must
be the one training printed for its last evaluation, and its logits PyTorch 1.13's forward
of the same weights (bench/pytorch_train.py's LeNet, the weights read from `tandem export`'s
ONNX initializers) on the same images, within 1e-5; PyTorch's arg-max over them must count
the same correct examples.

  tests/tools/predict_pytorch.py --tandem build/tools/tandem [--data DIR]

Run with /usr/bin/python3 (python3-torch, python3-onnx).
"""

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

AFTER_SETUP = os.environ.get("TANDEM_TESTS_AFTER_SETUP") == "1"
TOLERANCE = 1e-5
TEST_IMAGES = 500  # 7 batches of 64 and one of 52, padded


def skip(why):
    # Skipped, saying why, except after scripts/setup, where what it installs must be there.
    print(f"predict_pytorch: {'FAILED' if AFTER_SETUP else 'skipped'}: {why}")
    sys.exit(1 if AFTER_SETUP else 77)


try:
    import torch
    from onnx import load as onnx_load
    from onnx import numpy_helper
except ImportError as e:
    skip(f"{e} (python3-torch and python3-onnx; scripts/setup installs them)")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pytorch_train  # noqa: E402  (the zoo's models written in PyTorch)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"predict_pytorch: {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def idx(path, count):
    """The first `count` items of a gzipped IDX file, as uint8 [count, ...]."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    shape[0] = count
    start = 4 + 4 * dims
    return np.frombuffer(data, np.uint8, int(np.prod(shape)), start).reshape(shape)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", required=True)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    images_file = os.path.join(a.data, "t10k-images-idx3-ubyte.gz")
    if not os.path.exists(images_file):
        skip(f"no Fashion-MNIST in {a.data} (scripts/setup installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "ck")
        trained = run([a.tandem, "train", "--model", "lenet", "--data", a.data, "--limit-train",
                       "2000", "--limit-test", str(TEST_IMAGES), "--epochs", "1", "--batch", "64",
                       "--checkpoint", ck])
        # The table's last row: epoch train_loss train_acc test_acc ...
        rows = [line.split() for line in trained.splitlines() if re.match(r"\s*1\s", line)]
        train_accuracy = rows[-1][3]
        out = os.path.join(tmp, "logits.npy")
        predicted = run([a.tandem, "predict", "--checkpoint", ck, "--data",
                         f"fashion-mnist:{a.data}", "--limit", str(TEST_IMAGES), "--batch", "64",
                         "--devices", "cpu:0,cpu:1,cpu:2", "-o", out])
        m = re.search(r"accuracy (\S+) \((\d+) of (\d+) examples\)", predicted)
        assert m, predicted
        assert m.group(1) == train_accuracy, (
            f"predict's accuracy {m.group(1)} is not training's last evaluation {train_accuracy}")
        assert int(m.group(3)) == TEST_IMAGES, predicted
        logits = np.load(out)
        assert logits.shape == (TEST_IMAGES, 10) and logits.dtype == np.float32, logits.shape

        onnx_file = os.path.join(tmp, "lenet.onnx")
        run([a.tandem, "export", "--checkpoint", ck, "-o", onnx_file])
        weights = {i.name: numpy_helper.to_array(i) for i in onnx_load(onnx_file).graph.initializer}
        model = pytorch_train.lenet().eval()
        layers = {"conv1": model[0], "conv2": model[3], "fc1": model[7], "fc2": model[9]}
        with torch.no_grad():
            for name, layer in layers.items():
                layer.weight.copy_(torch.from_numpy(weights[f"{name}.w"].copy()))
                layer.bias.copy_(torch.from_numpy(weights[f"{name}.b"].copy()))
        assert len(weights) == 2 * len(layers), sorted(weights)

        images = idx(images_file, TEST_IMAGES).astype(np.float32) / np.float32(255)
        labels = idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"), TEST_IMAGES)
        with torch.no_grad():
            expected = model(torch.from_numpy(images).reshape(-1, 1, 28, 28)).numpy()
        worst = float(np.max(np.abs(expected - logits)))
        assert worst <= TOLERANCE, f"logits differ from PyTorch's by {worst} (> {TOLERANCE})"
        correct = int(np.sum(expected.argmax(axis=1) == labels))
        assert correct == int(m.group(2)), f"PyTorch counts {correct} correct, predict {m.group(2)}"
        print(f"predict_pytorch: {TEST_IMAGES} images, accuracy {m.group(1)} as training's, "
              f"logits within {worst:.2e} of PyTorch's")


if __name__ == "__main__":
    main()
