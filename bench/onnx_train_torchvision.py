#!/usr/bin/python3
"""torchvision models trained by `tandem train --onnx` on Fashion-MNIST, on 1 and 2 devices.

mobilenet_v2, efficientnet_b0 and resnet18 (torchvision 0.14, random weights) are built
for 1x28x28 images and 10 classes (their stem convolution taking one channel), exported by
torch.onnx.export at opset 17 keeping the training structure (TrainingMode.PRESERVE: the
BatchNormalization nodes), and trained for one epoch on the first --images training images
with SGD (--lr, momentum 0.9, batch 64) on cpu:0 and on cpu:0,cpu:1 with --sync-bn (every
device normalizes with the whole batch's statistics, as one device does), then evaluated
on the first 2,000 test images. One row per model and device count: the epoch line.

  bench/onnx_train_torchvision.py --tandem build/tools/tandem [--models ...] [--images N]

Run with /usr/bin/python3 (python3-torch, python3-torchvision); the data is Debian's
dataset-fashion-mnist (scripts/setup installs it).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torchvision


def build(name):
    torch.manual_seed(0)
    m = torchvision.models.get_model(name, weights=None, num_classes=10)
    nn = torch.nn
    if name == "resnet18":
        m.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    else:  # mobilenet_v2, efficientnet_b0: features[0] is conv-bn-activation
        old = m.features[0][0]
        m.features[0][0] = nn.Conv2d(1, old.out_channels, old.kernel_size, old.stride,
                                     old.padding, bias=False)
    return m.eval()


def export(model, path):
    """model (1x28x28 images) as ONNX at opset 17, an open batch, its BatchNormalization
    nodes kept (TrainingMode.PRESERVE on the eval-mode model): what `train --onnx` trains."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(2, 1, 28, 28), path, opset_version=17,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}},
                          training=torch.onnx.TrainingMode.PRESERVE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="build/tools/tandem")
    ap.add_argument("--models", default="mobilenet_v2,efficientnet_b0,resnet18")
    ap.add_argument("--images", type=int, default=6000)
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args()
    print(f"one epoch on {args.images} Fashion-MNIST images, batch 64, SGD lr {args.lr} "
          "momentum 0.9; test on 2,000 images")
    print(f"{'model':16} {'devices':8} epoch train_loss train_acc  test_acc  seconds  images/s")
    with tempfile.TemporaryDirectory(prefix="onnx-train.") as tmp:
        for name in args.models.split(","):
            path = os.path.join(tmp, f"{name}.onnx")
            export(build(name), path)
            for devices in (["cpu:0"], ["cpu:0,cpu:1", "--sync-bn"]):
                p = subprocess.run(
                    [args.tandem, "train", "--onnx", path, "--epochs", "1", "--limit-train",
                     str(args.images), "--limit-test", "2000", "--batch", "64", "--lr",
                     str(args.lr), "--momentum", "0.9", "--devices", *devices],
                    capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit(f"onnx_train_torchvision: {name} on {devices[0]}: {p.stderr.strip()}")
                line = p.stdout.strip().splitlines()[-1]
                print(f"{name:16} {len(devices[0].split(',')):<8} {line.strip()}", flush=True)


if __name__ == "__main__":
    main()
