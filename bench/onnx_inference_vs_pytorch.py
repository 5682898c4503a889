#!/usr/bin/python3
"""`tandem run` of torchvision models against PyTorch's forward, on the same threads.

Each model (torchvision 0.14, random weights, eval mode) is exported by torch.onnx.export
at opset 17 with an open batch. `tandem run MODEL.onnx` (one device, --threads-per-device
T) runs at batch 2 and batch 10, each the median of --repeats process wall times; PyTorch
runs model(x) at the same batches with T threads (median of as many calls, after one
warm-up). Per image is (batch 10 - batch 2) / 8 on each side; Tandem's fixed cost is its
batch-2 time less two images: the process, reading and importing the .onnx, compiling,
loading the weights and writing the output. PyTorch / Tandem above 1: Tandem is faster.

  bench/onnx_inference_vs_pytorch.py --tandem build/tools/tandem [--models resnet50,...]
        [--threads 2] [--repeats 3]

Run with /usr/bin/python3 (python3-torch, python3-torchvision, python3-onnx), with
OPENBLAS_NUM_THREADS=1 and OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, PyTorch's fastest
setting here (the script sets them for itself when it starts).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

if os.environ.get("OPENBLAS_NUM_THREADS") != "1" or "OPENBLAS_CORETYPE" in os.environ or \
        "OPENBLAS_L2_SIZE" in os.environ:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["OPENBLAS_NUM_THREADS"] = "1"  # before torch loads OpenBLAS: its threads fight PyTorch's
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import onnx  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from onnx import numpy_helper  # noqa: E402


def tandem_seconds(cli, path, x, tmp, threads, repeats):
    pb = os.path.join(tmp, f"x{x.shape[0]}.pb")
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), "x"), pb)
    times = []
    for _ in range(repeats):
        start = time.monotonic()
        p = subprocess.run([cli, "run", path, "--input", f"x={pb}", "--output-dir",
                            os.path.join(tmp, "out"), "--threads-per-device", str(threads)],
                           capture_output=True, text=True)
        times.append(time.monotonic() - start)
        if p.returncode != 0:
            sys.exit(f"onnx_inference_vs_pytorch: tandem run {path}: {p.stderr.strip()}")
    return statistics.median(times)


def pytorch_seconds(model, x, repeats):
    with torch.no_grad():
        model(x)
        times = []
        for _ in range(repeats):
            start = time.monotonic()
            model(x)
            times.append(time.monotonic() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="build/tools/tandem")
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vit_b_16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads; tandem run "
          f"--threads-per-device {args.threads}; median of {args.repeats}")
    print(f"{'model':14} {'tandem b2 s':>11} {'b10 s':>7} {'per image ms':>13} {'fixed s':>8} | "
          f"{'pytorch b2 s':>12} {'b10 s':>7} {'per image ms':>13} | {'PyTorch/Tandem':>14}")
    with tempfile.TemporaryDirectory(prefix="onnx-inference.") as tmp:
        for name in args.models.split(","):
            torch.manual_seed(0)
            model = torchvision.models.get_model(name, weights=None).eval()
            x10 = torch.randn(10, 3, 224, 224, generator=torch.Generator().manual_seed(1))
            x2 = x10[:2].clone()
            path = os.path.join(tmp, f"{name}.onnx")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, x2, path, opset_version=17, input_names=["x"],
                                  output_names=["logits"],
                                  dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
            t2 = tandem_seconds(args.tandem, path, x2, tmp, args.threads, args.repeats)
            t10 = tandem_seconds(args.tandem, path, x10, tmp, args.threads, args.repeats)
            p2 = pytorch_seconds(model, x2, args.repeats)
            p10 = pytorch_seconds(model, x10, args.repeats)
            t_img, p_img = (t10 - t2) / 8, (p10 - p2) / 8
            print(f"{name:14} {t2:11.3f} {t10:7.3f} {t_img * 1e3:13.1f} {t2 - 2 * t_img:8.3f} | "
                  f"{p2:12.3f} {p10:7.3f} {p_img * 1e3:13.1f} | {p_img / t_img:14.2f}")


if __name__ == "__main__":
    main()
