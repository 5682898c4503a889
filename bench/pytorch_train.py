#!/usr/bin/python3
"""PyTorch reference for Tandem's zoo models on Fashion-MNIST (the CPU comparisons in bench/).

--model lenet: the multi-GPU lesson's LeNet, as in Tandem's zoo:
  Conv2d(1,20,3) -> ReLU -> AvgPool2d(2,2) -> Conv2d(20,50,5) -> ReLU -> AvgPool2d(2,2)
  -> Flatten -> Linear(800,128) -> ReLU -> Linear(128,10)
--model resnet18: the lesson's small-image ResNet-18 (3x3 stride-1 stem with batch norm
  and ReLU, no max-pool, 4 stages x 2 residual blocks of 64/128/256/512 channels, 1x1
  projection on downsampling blocks, global average pool, Linear(512,10); 11,175,818
  parameters, as Tandem's).
PyTorch's default initialisation, or N(0, STD) for conv and linear weights with
--init normal:STD (the lesson's normal:0.01); SGD (--lr, --momentum) and cross-entropy.

Throughput mode (--steps N): 5 warm-up steps, then N timed training steps over shuffled
training data; the last line printed is machine readable:
  pytorch images_per_s=1234.5 steps=200 seconds=41.47 batch=256 threads=2
Epoch mode (--epochs E): E full epochs (a final partial batch is dropped, as Tandem's
training loader does); with --eval, test accuracy and seconds per epoch are printed.

Run with Debian's interpreter (/usr/bin/python3), which is the one python3-torch serves.
"""

import argparse
import contextlib
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
from torch import nn

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
WARMUP_STEPS = 5


def read_idx(path, magic_expected):
    """Reads one IDX file (.gz or plain) into a numpy uint8 array shaped by its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        sys.exit(f"{path}: not an IDX file")
    magic = struct.unpack(">I", data[:4])[0]
    if magic != magic_expected:
        sys.exit(f"{path}: bad magic number 0x{magic:08x}, expected 0x{magic_expected:08x}")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        sys.exit(f"{path}: truncated: header says {dims} but the body has {body.size} bytes")
    return body.reshape(dims)


def find(dir_, name):
    for candidate in (os.path.join(dir_, name + ".gz"), os.path.join(dir_, name)):
        if os.path.exists(candidate):
            return candidate
    sys.exit(f"fashion-mnist: {os.path.join(dir_, name)}.gz not found "
             "(install the Debian package dataset-fashion-mnist or pass --data DIR)")


def load(dir_, split):
    if not os.path.isdir(dir_):
        sys.exit(f"fashion-mnist: directory {dir_} does not exist "
                 "(install the Debian package dataset-fashion-mnist or pass --data DIR)")
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(find(dir_, f"{prefix}-images-idx3-ubyte"), 0x803)
    labels = read_idx(find(dir_, f"{prefix}-labels-idx1-ubyte"), 0x801)
    if images.shape[0] != labels.shape[0]:
        sys.exit(f"image/label count mismatch in {dir_} ({split})")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1).contiguous()
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


def blas_library():
    """The BLAS shared library this process loaded (reference BLAS is ~4x slower)."""
    try:
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    except OSError:
        return "unknown"
    names = sorted(os.path.basename(l) for l in libs if l.endswith(".so") or ".so." in l)
    return ",".join(names) or "none loaded"


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 20, 3), nn.ReLU(), nn.AvgPool2d(2, 2),
        nn.Conv2d(20, 50, 5), nn.ReLU(), nn.AvgPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(800, 128), nn.ReLU(),
        nn.Linear(128, 10))


class Residual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.proj(x) if self.proj is not None else x))


def resnet18(classes=10):
    layers = [nn.Conv2d(1, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(Residual(cin, cout, stride))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


MODELS = {"lenet": lenet, "resnet18": resnet18}


def initialize(model, init):
    if init == "default":
        return
    if not init.startswith("normal:"):
        sys.exit(f"--init: '{init}' is not default or normal:STD")
    std = float(init[len("normal:"):])
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.normal_(m.weight, std=std)


def batches(n, batch, generator):
    """Yields index tensors for one epoch over a fresh permutation; drops a partial batch."""
    perm = torch.randperm(n, generator=generator)
    for start in range(0, n - batch + 1, batch):
        yield perm[start:start + batch]


def evaluate(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, x.shape[0], batch):
            logits = model(x[start:start + batch])
            correct += (logits.argmax(1) == y[start:start + batch]).sum().item()
    model.train()
    return correct / x.shape[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=DEFAULT_DIR, help="directory of the IDX .gz files")
    p.add_argument("data_pos", nargs="?", help="same as --data")
    p.add_argument("--model", choices=sorted(MODELS), default="lenet")
    p.add_argument("--init", default="default", help="default or normal:STD")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--limit-train", type=int, default=0, help="use the first N training images")
    p.add_argument("--limit-test", type=int, default=0, help="use the first N test images")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--steps", type=int, help="timed training steps (default 200)")
    g.add_argument("--epochs", type=int, help="full epochs over the training set")
    p.add_argument("--eval", action="store_true", help="test accuracy after each epoch")
    p.add_argument("--autocast", choices=["off", "bf16"], default="off",
                   help="bf16: forward under torch.autocast('cpu', dtype=torch.bfloat16), "
                        "PyTorch's own mixed precision (f32 parameters and optimizer)")
    args = p.parse_args()
    data_dir = args.data_pos or args.data
    if args.steps is None and args.epochs is None:
        args.steps = 200

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    x_train, y_train = load(data_dir, "train")
    x_test, y_test = (load(data_dir, "test") if args.eval else (None, None))
    if args.limit_train:
        x_train, y_train = x_train[:args.limit_train], y_train[:args.limit_train]
    if args.limit_test and x_test is not None:
        x_test, y_test = x_test[:args.limit_test], y_test[:args.limit_test]
    n = x_train.shape[0]
    if n < args.batch:
        sys.exit(f"training set of {n} examples is smaller than one batch of {args.batch}")

    model = MODELS[args.model]()
    initialize(model, args.init)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    print(f"torch {torch.__version__}, {args.model}, threads={torch.get_num_threads()}, "
          f"batch={args.batch}, "
          f"train={n}" + (f", test={x_test.shape[0]}" if args.eval else "") +
          f", blas={blas_library()}", flush=True)

    def autocast():
        if args.autocast == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(idx):
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(x_train[idx]), y_train[idx])
        loss.backward()
        opt.step()
        return loss

    def index_stream():
        while True:
            yield from batches(n, args.batch, gen)

    if args.steps is not None:
        stream = index_stream()
        for _ in range(WARMUP_STEPS):
            step(next(stream))
        t0 = time.perf_counter()
        for _ in range(args.steps):
            loss = step(next(stream))
        loss.item()
        seconds = time.perf_counter() - t0
        ips = args.steps * args.batch / seconds
        print(f"pytorch images_per_s={ips:.1f} steps={args.steps} seconds={seconds:.3f} "
              f"batch={args.batch} threads={args.threads} autocast={args.autocast}")
        return

    total_seconds, total_images = 0.0, 0
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        loss_sum, correct, seen = 0.0, 0, 0
        for idx in batches(n, args.batch, gen):
            opt.zero_grad(set_to_none=True)
            with autocast():
                logits = model(x_train[idx])
                loss = loss_fn(logits, y_train[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * idx.numel()
            correct += (logits.argmax(1) == y_train[idx]).sum().item()
            seen += idx.numel()
        seconds = time.perf_counter() - t0
        total_seconds += seconds
        total_images += seen
        line = (f"epoch {epoch + 1} train_loss={loss_sum / seen:.4f} "
                f"train_acc={correct / seen:.4f} seconds={seconds:.2f} "
                f"images_per_s={seen / seconds:.1f}")
        if args.eval:
            line += f" test_acc={evaluate(model, x_test, y_test, 1000):.4f}"
        print(line, flush=True)
    print(f"pytorch images_per_s={total_images / total_seconds:.1f} epochs={args.epochs} "
          f"seconds={total_seconds:.3f} batch={args.batch} threads={args.threads}")


if __name__ == "__main__":
    main()
