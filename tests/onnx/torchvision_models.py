#!/usr/bin/python3
"""torchvision's classification models through `tandem run`, one row per model.

Each model of torchvision 0.14 (Debian's python3-torchvision) is built with random
weights, its batch-norm statistics and the norms' affines moved away from their defaults
(pytorch_models.perturb), put in eval mode and exported by torch.onnx.export at opset 17
with an open batch dimension. `tandem run` of the .onnx must give PyTorch's outputs within
1e-4 relative to the largest output, at batch 5 and at batch 1. A model Tandem refuses
prints the refusal under its row (every unsupported node type with its count).

  tests/onnx/torchvision_models.py --tandem build/tools/tandem [--models families|all|a,b]
  ../shared/tools/pytorch2 python3 tests/onnx/torchvision_models.py --models M --export-to D
  tests/onnx/torchvision_models.py --models M --exported D     # PyTorch 2's exports, run

The second pair exports with PyTorch 2.6 (Debian 13's, with its torchvision 0.21: the same
architectures) what PyTorch 1.13 cannot export (swin_v2's aten::zero), and runs the files
here, where `tandem` runs.

`families` (the default) is the smallest model of each family the issue lists; `all` is
torchvision.models.list_models(). The exit code is 1 when a model fails (ctest runs a
quick subset this way); a model PyTorch's own exporter cannot write is said and counted
apart. Run with /usr/bin/python3 (python3-torch, python3-torchvision,
python3-onnx).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx

import pytorch_models  # noqa: E402  (exits 77, or 1 after set-up, without PyTorch)
from pytorch_models import relative, run_onnx, perturb

import torch

try:
    import torchvision
except ImportError:
    pytorch_models.missing("torchvision_models", "torchvision", "python3-torchvision")

# The smallest model of each family of torchvision's classifiers.
FAMILIES = ["alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s",
            "googlenet", "inception_v3", "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_small",
            "mobilenet_v3_large", "regnet_x_400mf", "regnet_y_400mf", "resnet18",
            "resnext50_32x4d", "shufflenet_v2_x0_5", "squeezenet1_1", "swin_t", "vgg11_bn",
            "vit_b_16", "wide_resnet50_2", "maxvit_t"]
# Image sizes other than 224 (inception_v3's stem wants 299).
IMAGE = {"inception_v3": 299}


def build(name):
    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": False} if name in ("googlenet",
                                                                      "inception_v3") else {}
    model = torchvision.models.get_model(name, weights=None, **kwargs)
    # Weights initialized to zeros (vit's head) would make the output the bias whatever the
    # input: drawn like the others, so that the comparison sees every layer.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0, 0.02)
    return perturb(model).eval()


# check()'s verdict on a model PyTorch's own exporter cannot write (swin_v2's aten::zero at
# opset 17 in PyTorch 1.13): neither a pass nor a failure of Tandem's, counted apart.
EXPORT_FAILED = "export failed"


def export(name, batch, tmp):
    """The model exported to tmp/NAME.onnx, with its inputs and PyTorch's outputs at batch
    `batch` and 1 (tmp/NAME.npz); EXPORT_FAILED when PyTorch's exporter cannot write it."""
    model = build(name)
    size = IMAGE.get(name, 224)
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        want, want_one = model(x).numpy(), model(x[:1]).numpy()
    path = os.path.join(tmp, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kwargs = {"dynamo": False} if not torch.__version__.startswith("1.") else {}
            torch.onnx.export(model, x, path, opset_version=17, input_names=["x"],
                              output_names=["logits"],
                              dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, **kwargs)
        except torch.onnx.errors.OnnxExporterError as e:  # no model for Tandem to read
            print(f"{name:<20} not exported: PyTorch's exporter: {str(e).splitlines()[0][:120]}")
            return EXPORT_FAILED
    params = sum(p.numel() for p in model.parameters()) / 1e6
    np.savez(os.path.join(tmp, f"{name}.npz"), x=x.numpy(), want=want, want_one=want_one,
             params=params, versions=f"torchvision {torchvision.__version__}, torch {torch.__version__}")
    return path


def check(cli, name, tmp):
    """One exported model's row (and the refusal under it); returns its failure or None."""
    path = os.path.join(tmp, f"{name}.onnx")
    saved = np.load(os.path.join(tmp, f"{name}.npz"))
    x, want, want_one = torch.from_numpy(saved["x"]), saved["want"], saved["want_one"]
    nodes = len(onnx.load(path, load_external_data=False).graph.node)
    row = f"{name:<20} {float(saved['params']):7.1f}M {nodes:6d}"
    start = time.monotonic()
    try:
        got = run_onnx(cli, path, x, tmp, "batch")
        seconds = time.monotonic() - start
        one = run_onnx(cli, path, x[:1], tmp, "one")
    except RuntimeError as e:
        print(f"{row}  refused")
        message = str(e).split(": exit ", 1)[-1]
        for line in message.splitlines():
            print(f"    {line}")
        return f"{name}: {message.splitlines()[0] if message else 'no message'}"
    if got.shape != want.shape or one.shape != want_one.shape:
        print(f"{row}  output {list(got.shape)}, PyTorch's {list(want.shape)}")
        return f"{name}: output {list(got.shape)}, PyTorch's {list(want.shape)}"
    rel, rel_one = relative(got, want), relative(one, want_one)
    ok = rel <= pytorch_models.TOLERANCE and rel_one <= pytorch_models.TOLERANCE
    print(f"{row}  {'ok' if ok else 'DIFFERS':<8} {rel:9.2e} {rel_one:9.2e} {seconds:8.1f}")
    return None if ok else f"{name}: relative difference {max(rel, rel_one):.2e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="build/tools/tandem")
    ap.add_argument("--models", default="families",
                    help="families (the smallest of each), all, or a comma-separated list")
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--export-to", metavar="DIR",
                    help="only export the models (with inputs and PyTorch's outputs) to DIR: "
                    "run so under ../shared/tools/pytorch2 for PyTorch 2's exporter")
    ap.add_argument("--exported", metavar="DIR",
                    help="run the models an --export-to run left in DIR instead of exporting")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = (FAMILIES if args.models == "families" else
             torchvision.models.list_models(module=torchvision.models) if args.models == "all"
             else args.models.split(","))
    known = set(torchvision.models.list_models(module=torchvision.models))
    for name in names:
        if name not in known and not args.exported:
            ap.error(f"--models: '{name}' is not a torchvision {torchvision.__version__} "
                     "classification model")
    if args.export_to:
        os.makedirs(args.export_to, exist_ok=True)
        for name in names:
            if export(name, args.batch, args.export_to) != EXPORT_FAILED:
                print(f"{name}: exported to {args.export_to}")
        return 0
    versions = f"torchvision {torchvision.__version__}, torch {torch.__version__}"
    if args.exported:  # the versions that exported (and ran) the models
        saved = [f for f in sorted(os.listdir(args.exported)) if f.endswith(".npz")]
        if saved:
            versions = str(np.load(os.path.join(args.exported, saved[0]))["versions"])
        versions += f" (exported to {args.exported})"
    print(f"{versions}, opset 17, batch {args.batch} and 1, tolerance "
          f"{pytorch_models.TOLERANCE} of the largest output")
    print(f"{'model':<20} {'params':>8} {'nodes':>6}  {'result':<8} {'batch ' + str(args.batch):>9} "
          f"{'batch 1':>9} {'run (s)':>8}")
    failures, unexported = [], []
    with tempfile.TemporaryDirectory(prefix="torchvision-onnx.") as tmp:
        for name in names:
            where = args.exported or tmp
            if args.exported:
                failure = (check(args.tandem, name, where)
                           if os.path.exists(os.path.join(where, f"{name}.onnx")) else EXPORT_FAILED)
            else:
                failure = export(name, args.batch, where)
                failure = failure if failure == EXPORT_FAILED else check(args.tandem, name, where)
            if failure == EXPORT_FAILED:
                unexported.append(name)
            elif failure:
                failures.append(failure)
            for f in os.listdir(tmp):  # the largest models' files add up to gigabytes
                path = os.path.join(tmp, f)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    exported = len(names) - len(unexported)
    print(f"{exported - len(failures)} of {exported} models run within "
          f"{pytorch_models.TOLERANCE} of PyTorch" +
          (f"; PyTorch could not export {', '.join(unexported)}" if unexported else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
