#!/usr/bin/env python3
"""ResNet-18 training on one GPU, in one run: PyTorch eager, torch.compile and Tandem.

Contenders, each in its own process (one crash or time-out costs only its row), in this
order so that a short time limit still gives the issue's ratios:
  tandem-bf16    tandem train --model resnet18 --devices cuda:0 --precision bf16
  eager          PyTorch eager, channels_last, torch.autocast(cuda, bf16), cudnn.benchmark
  compile        the same model through torch.compile (default mode)
  tandem-f32     tandem train ... --precision f32 (TF32 allowed, the default)

The model is the lessons' small-image ResNet-18 that Tandem's zoo `resnet18` builds
(bench/pytorch_train.py's resnet18(): 1x28x28 input, 3x3 stem, no max-pool, 11,175,818
parameters); batch 256, SGD lr 0.1 without momentum (Tandem's defaults for resnet18),
cross-entropy. Data: Tandem reads the Fashion-MNIST IDX files from --data (its own
loader: pinned host memory, asynchronous copies). PyTorch reads the same files into one
GPU tensor and indexes a fresh permutation each epoch (no DataLoader: the most favourable
input path for PyTorch); without the files it uses random images of the same shape
(said in its row). PyTorch reads its loss and accuracy sums once per epoch, Tandem once
per step (as its trainer does).

Timing: --epochs E (default 3) epochs each; the first is warm-up (cuDNN algorithm
choice, CUDA-graph recording, torch.compile's compilation) and is left out; seconds per
epoch is the mean of the others, for an epoch of 234 full batches (59,904 images: the
partial batch is dropped by both); images/s is images over seconds. Last lines, machine
readable (scripts/gpu-check puts them in its table):

  result contender=NAME seconds_per_epoch=S images_per_s=R NOTE...
  ratio tandem-bf16/eager=X tandem-bf16/compile=Y tandem-bf16/tandem-f32=Z
  target ...: met|missed

Exit code 0: every contender ran; 1: one failed or ran out of time; 2: no GPU, no
PyTorch, no tandem binary.
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FULL_EPOCH_IMAGES = 234 * 256  # 60,000 images in batches of 256, the partial one dropped
CONTENDERS = ["tandem-bf16", "eager", "compile", "tandem-f32"]
# The targets on one H100.
TARGET_SECONDS = 0.6
TARGET_VS_EAGER = 1.5
TARGET_VS_COMPILE = 1.2


def die(msg, code=2):
    print(f"gpu_resnet18: {msg}", flush=True)
    sys.exit(code)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tandem", default=os.path.join(HERE, "..", "build", "tools", "tandem"),
                   help="the tandem binary (default build/tools/tandem)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="Fashion-MNIST directory (IDX .gz files)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per contender, the first untimed")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--limit-train", type=int, default=0,
                   help="use only the first N training images (figures are scaled to a full epoch)")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help="comma-separated subset of " + ",".join(CONTENDERS))
    p.add_argument("--time-limit", type=float, default=540,
                   help="seconds for the whole run; a contender that does not fit is not run")
    p.add_argument("--optional", default="",
                   help="comma-separated contenders run only if time remains: one left out, or "
                        "cut short by --time-limit, is a note, not a failure (scripts/gpu-check's "
                        "second call: torch.compile and Tandem f32)")
    p.add_argument("--csv", help="also write the results to this CSV file")
    # For testing this script on a machine without a GPU (the logic, not the speed).
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--tandem-devices", default="cuda:0", help=argparse.SUPPRESS)
    p.add_argument("--child", choices=["eager", "compile"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error("--epochs must be at least 2 (the first is warm-up)")
    if args.batch < 1 or args.limit_train < 0:
        p.error("--batch must be positive and --limit-train not negative")
    names = [c for c in args.contenders.split(",") if c]
    bad = [c for c in names if c not in CONTENDERS]
    if bad or not names:
        p.error(f"--contenders: unknown {','.join(bad) or '(none given)'}; "
                f"choose from {','.join(CONTENDERS)}")
    args.contenders = names
    args.optional = [c for c in args.optional.split(",") if c]
    bad = [c for c in args.optional if c not in CONTENDERS]
    if bad:
        p.error(f"--optional: unknown {','.join(bad)}; choose from {','.join(CONTENDERS)}")
    return args


def result_line(name, epoch_seconds, images_per_epoch, note):
    """The machine-readable line: mean over the timed epochs, scaled to a full epoch."""
    seconds = sum(epoch_seconds) / len(epoch_seconds)
    ips = images_per_epoch / seconds
    per_full_epoch = FULL_EPOCH_IMAGES / ips
    if images_per_epoch != FULL_EPOCH_IMAGES:
        note += f" scaled_from={images_per_epoch}_images"
    epochs = " ".join(f"{s:.3f}" for s in epoch_seconds)
    return (f"result contender={name} seconds_per_epoch={per_full_epoch:.3f} "
            f"images_per_s={ips:.0f} timed_epochs=[{epochs.replace(' ', ',')}] {note}").strip()


# ---------------------------------------------------------------------------- PyTorch


def pytorch_child(args):
    """One PyTorch contender in this process; prints its result line."""
    import torch
    from torch import nn
    sys.path.insert(0, HERE)
    import pytorch_train  # the same ResNet-18 and IDX reader as the CPU comparisons

    device = torch.device(args.device)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    if os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte.gz")):
        x, y = pytorch_train.load(args.data, "train")
        source = "data=fashion-mnist"
    else:
        x = torch.rand(60000, 1, 28, 28)
        y = torch.randint(0, 10, (60000,))
        source = "data=random(no_fashion-mnist)"
    if args.limit_train:
        x, y = x[:args.limit_train], y[:args.limit_train]
    n = x.shape[0]
    steps = n // args.batch
    if steps == 0:
        die(f"{n} training images make no batch of {args.batch}")
    x = x.to(device).contiguous(memory_format=torch.channels_last)
    y = y.to(device)

    model = pytorch_train.resnet18().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)
    loss_fn = nn.CrossEntropyLoss()
    step_model = torch.compile(model) if args.child == "compile" else model
    dtype = torch.bfloat16

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    epoch_seconds = []
    for epoch in range(args.epochs):
        perm = torch.randperm(n, device=device)
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device, dtype=torch.int64)
        sync()
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=dtype):
                logits = step_model(xb)
                loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            loss_sum += loss.detach().float()
            correct += (logits.argmax(1) == yb).sum()
        sync()
        seconds = time.perf_counter() - t0
        print(f"{args.child} epoch {epoch + 1}: {seconds:.3f} s, loss {loss_sum.item() / steps:.4f}, "
              f"train acc {correct.item() / (steps * args.batch):.4f}"
              + (" (warm-up, not timed)" if epoch == 0 else ""), flush=True)
        if epoch > 0:
            epoch_seconds.append(seconds)
    name = "eager" if args.child == "eager" else "compile"
    print(result_line(name, epoch_seconds, steps * args.batch,
                      f"{source} torch={torch.__version__} channels_last autocast=bf16"), flush=True)


# ---------------------------------------------------------------------------- Tandem


def tandem_contender(args, precision, timeout, workdir):
    """Runs tandem train; returns its result line, or None after printing why not."""
    name = f"tandem-{precision}"
    metrics = os.path.join(workdir, f"{name}.csv")
    cmd = [args.tandem, "train", "--model", "resnet18", "--devices", args.tandem_devices,
           "--batch", str(args.batch), "--epochs", str(args.epochs), "--precision", precision,
           "--data", args.data, "--limit-test", "1000", "--metrics", metrics]
    if args.limit_train:
        cmd += ["--limit-train", str(args.limit_train)]
    print("$ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        print(out, flush=True)
        print(f"note contender={name} timed out after {timeout:.0f} s", flush=True)
        return None
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        print(f"note contender={name} failed: tandem exit {proc.returncode}", flush=True)
        return None
    with open(metrics, newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) < 2:
        print(f"note contender={name} failed: {len(rows)} epochs in {metrics}", flush=True)
        return None
    timed = rows[1:]
    seconds = [float(r["seconds"]) for r in timed]
    images = (args.limit_train or 60000) // args.batch * args.batch
    return result_line(name, seconds, images,
                       f"data=fashion-mnist devices={args.tandem_devices} tf32=on"
                       + (f" test_acc={float(rows[-1]['test_acc']):.4f}" if rows[-1].get("test_acc") else ""))


# ---------------------------------------------------------------------------- the run


def parse_result(line):
    fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
    return fields["contender"], float(fields["seconds_per_epoch"]), float(fields["images_per_s"])


def main():
    args = parse_args()
    if args.child:
        return pytorch_child(args)

    try:
        import torch
    except ImportError as e:
        die(f"no PyTorch in {sys.executable} ({e}): run with the GPU machine's python3")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            die(f"no CUDA GPU visible to PyTorch {torch.__version__} (built for CUDA "
                f"{torch.version.cuda}, {torch.cuda.device_count()} devices) in {sys.executable}")
        gpu = torch.cuda.get_device_name(0)
    else:
        gpu = f"none (--device {args.device}: a test of this script, not a benchmark)"
    if any(c.startswith("tandem") for c in args.contenders) and not os.access(args.tandem, os.X_OK):
        die(f"{args.tandem} is not an executable: build Tandem first (scripts/gpu-check does)")
    data_note = args.data if os.path.isdir(args.data) else f"{args.data} (missing)"
    print(f"gpu_resnet18: {gpu}; torch {torch.__version__}; batch {args.batch}; {args.epochs} "
          f"epochs each (first untimed); data {data_note}; contenders {','.join(args.contenders)}",
          flush=True)

    deadline = time.monotonic() + args.time_limit
    results, failed = {}, False
    workdir = tempfile.mkdtemp(prefix="gpu_resnet18.")
    try:
        for name in args.contenders:
            left = deadline - time.monotonic()
            optional = name in args.optional
            if left < 20:
                print(f"note contender={name} not run: {left:.0f} s left of --time-limit"
                      f"{' (optional)' if optional else ''}", flush=True)
                failed = failed or not optional
                continue
            print(f"\n== {name}", flush=True)
            if name.startswith("tandem"):
                line = tandem_contender(args, name.split("-")[1], left, workdir)
            else:
                line = pytorch_subprocess(name, left)
            if line is None:
                failed = failed or not optional
                continue
            print(line, flush=True)
            results[name] = (line, *parse_result(line)[1:])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print("\n== results", flush=True)
    for name in args.contenders:
        if name in results:
            print(results[name][0], flush=True)
    ips = {n: r[2] for n, r in results.items()}
    ratio = []
    for other in ("eager", "compile", "tandem-f32"):
        if "tandem-bf16" in ips and other in ips:
            ratio.append(f"tandem-bf16/{other}={ips['tandem-bf16'] / ips[other]:.2f}")
    if ratio:
        print("ratio " + " ".join(ratio) + " (images/s)", flush=True)
    if "tandem-bf16" in results:
        sec = results["tandem-bf16"][1]
        print(f"target tandem-bf16 <= {TARGET_SECONDS} s/epoch: {sec:.3f} "
              f"{'met' if sec <= TARGET_SECONDS else 'missed'}", flush=True)
        for other, want in (("eager", TARGET_VS_EAGER), ("compile", TARGET_VS_COMPILE)):
            if other in ips:
                r = ips["tandem-bf16"] / ips[other]
                print(f"target tandem-bf16 >= {want}x {other}: {r:.2f}x {'met' if r >= want else 'missed'}",
                      flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["contender", "seconds_per_epoch", "images_per_s", "line"])
            for name in args.contenders:
                if name in results:
                    line, sec, rate = results[name]
                    w.writerow([name, f"{sec:.3f}", f"{rate:.0f}", line])
    return 1 if failed else 0


def pytorch_subprocess(name, timeout):
    """Runs one PyTorch contender in a child process (fresh CUDA context and compile cache)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + [
        a for a in sys.argv[1:]]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        print(out, flush=True)
        print(f"note contender={name} timed out after {timeout:.0f} s", flush=True)
        return None
    lines = proc.stdout.splitlines()
    print("\n".join(l for l in lines if not l.startswith("result ")), flush=True)
    result = [l for l in lines if l.startswith("result ")]
    if proc.returncode != 0 or not result:
        print(f"note contender={name} failed: exit {proc.returncode}", flush=True)
        return None
    return result[-1]


if __name__ == "__main__":
    sys.exit(main())
