#!/usr/bin/python3
"""PyTorch reference for Tandem's zoo models on Fashion-MNIST (the CPU comparisons in bench/).

--model lenet: the multi-GPU lesson's LeNet, as in Tandem's zoo:
  Conv2d(1,20,3) -> ReLU -> AvgPool2d(2,2) -> Conv2d(20,50,5) -> ReLU -> AvgPool2d(2,2)
  -> Flatten -> Linear(800,128) -> ReLU -> Linear(128,10)
--model resnet18: the lesson's small-image ResNet-18 (3x3 stride-1 stem with batch norm
  and ReLU, no max-pool, 4 stages x 2 residual blocks of 64/128/256/512 channels, 1x1
  projection on downsampling blocks, global average pool, Linear(512,10); 11,175,818
  parameters, as Tandem's).
--model vit: issue 24's Vision Transformer, as frontend/zoo/vit.cc builds it: 4x4 stride-4
  patch convolution (49 tokens of width 64), class token and learned position embedding,
  6 pre-norm blocks (LayerNorm, nn.MultiheadAttention with 4 heads, or with --attention
  manual the same attention written out; dropout 0.1 after the output projection; LayerNorm,
  Linear(64,128), erf GELU, dropout, Linear(128,64), dropout), final LayerNorm, Linear(64,10)
  on the class token; 205,962 parameters, as Tandem's.
--model mlp: Flatten, 2 x (Linear to 256, erf GELU, dropout 0.1), Linear(256,10); 269,322
  parameters.
Initialisation: PyTorch's default, N(0, STD) for conv and linear weights with --init
normal:STD (the lesson's normal:0.01), or --init kaiming (Tandem's default: N(0, 2/fan_in)
for conv and linear weights, attention's included, biases zero). The ViT's class token and
position embedding always start at trunc_normal(0.02), as timm's and Tandem's do.
Optimizer and schedule: each model's recipe unless flags say otherwise: lenet and resnet18
SGD lr 0.2; vit and mlp AdamW lr 1e-3, betas 0.9/0.999, weight decay 0.05, one epoch of
linear warmup then cosine to 0 per step (Tandem's runtime/lr_schedule.cc, same formula).
Loss: cross-entropy.

Throughput mode (--steps N): 5 warm-up steps, then N timed training steps over shuffled
training data; the last line printed is machine readable (loss: the last step's):
  pytorch images_per_s=1234.5 steps=200 seconds=41.47 batch=256 threads=2 autocast=off loss=0.412345
Epoch mode (--epochs E): E full epochs (a final partial batch is dropped, as Tandem's
training loader does); with --eval, test accuracy and seconds per epoch are printed.

Run with Debian's interpreter (/usr/bin/python3), which is the one python3-torch serves.
"""

import argparse
import contextlib
import gzip
import math
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


class SelfAttention(nn.Module):
    """Multi-head self-attention written out (--attention manual): q, k, v and output
    projections as nn.Linear, softmax(q k^T / sqrt(d)) v per head. PyTorch 1.13 has no
    F.scaled_dot_product_attention (it came with 2.0)."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        n, t, d = x.shape
        split = lambda y: y.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d // self.heads))
        mixed = torch.softmax(scores, dim=-1) @ v  # [N, H, T, d]
        return self.proj(mixed.transpose(1, 2).reshape(n, t, d))


class VitBlock(nn.Module):
    """Pre-norm transformer block; dropout where frontend/zoo/vit.cc has it (none on the
    attention weights)."""

    def __init__(self, width, heads, mlp, p, attention):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        if attention == "mha":
            self.attn = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        else:
            self.attn = SelfAttention(width, heads)
        self.drop = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Dropout(p),
                                 nn.Linear(mlp, width), nn.Dropout(p))

    def forward(self, x):
        h = self.ln1(x)
        if isinstance(self.attn, nn.MultiheadAttention):
            a = self.attn(h, h, h, need_weights=False)[0]
        else:
            a = self.attn(h)
        x = x + self.drop(a)
        return x + self.mlp(self.ln2(x))


class Vit(nn.Module):
    def __init__(self, attention="mha", patch=4, width=64, depth=6, heads=4, mlp=128, p=0.1,
                 classes=10):
        super().__init__()
        tokens = (28 // patch) ** 2 + 1
        self.patch = nn.Conv2d(1, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.zeros(1, tokens, width))
        nn.init.trunc_normal_(self.cls, std=0.02)
        nn.init.trunc_normal_(self.pos, std=0.02)
        self.blocks = nn.Sequential(
            *(VitBlock(width, heads, mlp, p, attention) for _ in range(depth)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)  # [N, 49, D]
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.ln(self.blocks(h))[:, 0])


def mlp(classes=10, hidden=256, p=0.1):
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, hidden), nn.GELU(), nn.Dropout(p),
        nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(p),
        nn.Linear(hidden, classes))


MODELS = {"lenet": lenet, "resnet18": resnet18, "vit": Vit, "mlp": mlp}

# Each model's training recipe, as Tandem's zoo gives it (frontend/zoo/*.cc), except the
# CNNs' lr, which keeps these scripts' lesson setting.
SGD_RECIPE = dict(optimizer="sgd", lr=0.2, weight_decay=0.0, schedule="constant",
                  warmup_epochs=0)
ADAMW_RECIPE = dict(optimizer="adamw", lr=1e-3, weight_decay=0.05, schedule="cosine",
                    warmup_epochs=1)
RECIPES = {"lenet": SGD_RECIPE, "resnet18": SGD_RECIPE, "vit": ADAMW_RECIPE,
           "mlp": ADAMW_RECIPE}


def initialize(model, init):
    if init == "default":
        return
    if init == "kaiming":
        # Tandem's default (backend/initializers.cc): N(0, 2 / fan_in), fan_in the product of
        # all dimensions but the first; biases zero. nn.MultiheadAttention packs q, k and v
        # into in_proj_weight [3D, D]: each row's fan-in is D, the same as three Linears.
        for m in model.modules():
            weights = []
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                weights = [(m.weight, m.bias)]
            elif isinstance(m, nn.MultiheadAttention):
                weights = [(m.in_proj_weight, m.in_proj_bias)]
            for w, b in weights:
                nn.init.kaiming_normal_(w, mode="fan_in", nonlinearity="relu")
                if b is not None:
                    nn.init.zeros_(b)
        return
    if not init.startswith("normal:"):
        sys.exit(f"--init: '{init}' is not default, kaiming or normal:STD")
    std = float(init[len("normal:"):])
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.normal_(m.weight, std=std)
        elif isinstance(m, nn.MultiheadAttention):
            nn.init.normal_(m.in_proj_weight, std=std)


def lr_factor(step, schedule, warmup, total):
    """Tandem's LrSchedule::factor (runtime/lr_schedule.cc): update `step` (from 0) of
    `total`; linear warmup (step + 1) / warmup, cosine from 1 to 0 after it."""
    f = 1.0
    if schedule == "cosine":
        span = max(total - warmup, 1)
        t = min(max(step - warmup, 0), span)
        f = 0.5 * (1 + math.cos(math.pi * t / span))
    if step < warmup:
        f *= (step + 1) / warmup
    return f


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
    p.add_argument("--attention", choices=["mha", "manual"], default="mha",
                   help="vit: nn.MultiheadAttention (default) or the attention written out")
    p.add_argument("--optimizer", choices=["sgd", "adamw"], help="default: the model's recipe")
    p.add_argument("--lr", type=float, help="default: the model's recipe")
    p.add_argument("--momentum", type=float, default=0.0, help="sgd")
    p.add_argument("--weight-decay", type=float, help="default: the model's recipe")
    p.add_argument("--beta1", type=float, default=0.9, help="adamw")
    p.add_argument("--beta2", type=float, default=0.999, help="adamw")
    p.add_argument("--eps", type=float, default=1e-8, help="adamw")
    p.add_argument("--schedule", choices=["constant", "cosine"],
                   help="per-step lr factor; default: the model's recipe")
    p.add_argument("--warmup-epochs", type=int, help="linear warmup; default: the model's recipe")
    p.add_argument("--limit-train", type=int, default=0, help="use the first N training images")
    p.add_argument("--limit-test", type=int, default=0, help="use the first N test images")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--steps", type=int, help="timed training steps (default 200)")
    g.add_argument("--epochs", type=int, help="full epochs over the training set")
    p.add_argument("--eval", action="store_true", help="test accuracy after each epoch")
    p.add_argument("--stop-at", type=float,
                   help="with --eval: stop after the first epoch whose test accuracy reaches "
                        "this (a time-to-accuracy run needs no more)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (PyTorch 2: ../shared/tools/pytorch2); its "
                   "compilation falls in the warm-up steps")
    p.add_argument("--autocast", choices=["off", "bf16"], default="off",
                   help="bf16: forward under torch.autocast('cpu', dtype=torch.bfloat16), "
                        "PyTorch's own mixed precision (f32 parameters and optimizer)")
    args = p.parse_args()
    data_dir = args.data_pos or args.data
    if args.steps is None and args.epochs is None:
        args.steps = 200
    if args.stop_at is not None and not (args.eval and args.epochs):
        p.error("--stop-at needs --eval and --epochs (it stops after an epoch's test accuracy)")

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

    recipe = dict(RECIPES[args.model])
    for key in recipe:
        if getattr(args, key) is not None:
            recipe[key] = getattr(args, key)
    model = MODELS[args.model](attention=args.attention) if args.model == "vit" \
        else MODELS[args.model]()
    initialize(model, args.init)
    trained = model  # the parameters the optimizer updates: the compiled model shares them
    if args.compile:
        if not hasattr(torch, "compile"):
            sys.exit(f"--compile needs PyTorch 2 (this is {torch.__version__}): run under "
                     "../shared/tools/pytorch2")
        model = torch.compile(model)
    if recipe["optimizer"] == "adamw":
        opt = torch.optim.AdamW(trained.parameters(), lr=recipe["lr"],
                                betas=(args.beta1, args.beta2), eps=args.eps,
                                weight_decay=recipe["weight_decay"])
    else:
        opt = torch.optim.SGD(trained.parameters(), lr=recipe["lr"], momentum=args.momentum,
                              weight_decay=recipe["weight_decay"])
    steps_per_epoch = n // args.batch
    total_steps = (WARMUP_STEPS + args.steps) if args.steps is not None \
        else args.epochs * steps_per_epoch
    warmup = min(recipe["warmup_epochs"] * steps_per_epoch, total_steps - 1)
    sched = None
    if recipe["schedule"] != "constant" or warmup > 0:
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_factor(s, recipe["schedule"], warmup, total_steps))
    loss_fn = nn.CrossEntropyLoss()
    params = sum(p.numel() for p in trained.parameters())
    print(f"torch {torch.__version__}{' compiled' if args.compile else ''}, {args.model}"
          + (f" ({args.attention} attention)" if args.model == "vit" else "")
          + f", params={params}, threads={torch.get_num_threads()}, batch={args.batch}, "
          f"{recipe['optimizer']} lr={recipe['lr']:g} wd={recipe['weight_decay']:g}, "
          f"schedule={recipe['schedule']} warmup={warmup} steps, init={args.init}, "
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
        if sched is not None:
            sched.step()
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
        final_loss = loss.item()
        seconds = time.perf_counter() - t0
        ips = args.steps * args.batch / seconds
        print(f"pytorch images_per_s={ips:.1f} steps={args.steps} seconds={seconds:.3f} "
              f"batch={args.batch} threads={args.threads} autocast={args.autocast} "
              f"compiled={int(args.compile)} "
              f"loss={final_loss:.6f}")
        return

    total_seconds, total_images, epochs_run = 0.0, 0, 0
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
            if sched is not None:
                sched.step()
            loss_sum += loss.item() * idx.numel()
            correct += (logits.argmax(1) == y_train[idx]).sum().item()
            seen += idx.numel()
        seconds = time.perf_counter() - t0
        total_seconds += seconds
        total_images += seen
        epochs_run += 1
        line = (f"epoch {epoch + 1} train_loss={loss_sum / seen:.4f} "
                f"train_acc={correct / seen:.4f} seconds={seconds:.2f} "
                f"images_per_s={seen / seconds:.1f}")
        test_acc = evaluate(model, x_test, y_test, 1000) if args.eval else None
        if test_acc is not None:
            line += f" test_acc={test_acc:.4f}"
        print(line, flush=True)
        if args.stop_at is not None and test_acc is not None and test_acc >= args.stop_at:
            print(f"stopped: test accuracy {test_acc:.4f} reached --stop-at {args.stop_at}")
            break
    print(f"pytorch images_per_s={total_images / total_seconds:.1f} epochs={epochs_run} "
          f"seconds={total_seconds:.3f} batch={args.batch} threads={args.threads}")


if __name__ == "__main__":
    main()
