#!/usr/bin/python3
"""PyTorch's own exports of the zoo's models through `tandem run`.

LeNet, ResNet-18 and the ViT written in PyTorch (bench/pytorch_train.py, the zoo's models;
the ViT twice: with nn.MultiheadAttention and with the attention written out) with random
weights, batch-norm statistics and layer-norm affines are exported by torch.onnx.export
(PyTorch 1.13, its default opset 14, the batch symbolic) twice: as users export for
inference (TrainingMode.EVAL: batch norm folded into the convolutions) and keeping the
training structure (PRESERVE on an eval-mode model: the BatchNormalization nodes with
their running statistics). `tandem run` must give PyTorch's outputs on the same input
within 1e-4 relative (max |diff| over max |output|), on the batch and on its first image
alone (the symbolic batch), and the module `tandem import` writes, run from its .tir and
weights, the same outputs bit for bit.
PyTorch's ViT with nn.MultiheadAttention (sequence-first: the batch folded into a middle
axis of its reshapes) imported by `tandem train --onnx` trains on two devices past chance
and as on one device (train loss within 1e-3 relative, test accuracy within 0.02).
MobileNet's layers (`mobile`): a small network of conv, batch norm and ReLU6 (Clip 0..6),
a depthwise and a grouped convolution, Hardswish (HardSwish) and a squeeze-and-excite gate
of Hardsigmoid (HardSigmoid, alpha 1/6), exported likewise; and a HardSigmoid of another
slope and Clips of other bounds (the clip op), against numpy's and PyTorch's values.
With --train, PyTorch's LeNet imported by `tandem train --onnx --reinit` trains on two
devices to the zoo LeNet's test accuracy (within 0.05: other random draws of the same
initializers) with the same flags.

  tests/onnx/pytorch_models.py --tandem build/tools/tandem [--models lenet,resnet18,vit]

Run with /usr/bin/python3 (python3-torch, python3-onnx).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

def missing(test, what, package):
    """Ends a test whose oracle `what` (Debian's `package`) is not installed: skipped,
    saying so, except after scripts/setup (scripts/test sets TANDEM_TESTS_AFTER_SETUP=1),
    where a missing package is a failure, as for every test."""
    after_setup = os.environ.get("TANDEM_TESTS_AFTER_SETUP") == "1"
    print(f"{test}: {'FAILED' if after_setup else 'skipped'}: {what} is not installed "
          f"({package}; scripts/setup installs it)")
    sys.exit(1 if after_setup else 77)


try:
    import torch
except ImportError:
    missing("pytorch_models", "PyTorch", "python3-torch")  # the oracle

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pytorch_train  # noqa: E402  (the zoo's models written in PyTorch)

TOLERANCE = 1e-4


# Each --models name: the variants checked, as (label, constructor's arguments).
VARIANTS = {
    "lenet": [("lenet", {})],
    "resnet18": [("resnet18", {})],
    "vit": [("vit", {"attention": "mha"}), ("vit-manual", {"attention": "manual"})],
    "mobile": [("mobile", {})],
}


class Mobile(torch.nn.Module):
    """MobileNet v2 / v3's layers on 1x28x28 images: conv-bn-ReLU6, an average pool counting
    its padding (Pad, AveragePool), a depthwise 3x3 (groups = channels) after a ZeroPad2d
    (Pad, Conv) and a grouped 1x1 (2 groups, as ShuffleNet's) with bn-Hardswish, a
    squeeze-and-excite gate (pool, 1x1 convs, ReLU, Hardsigmoid, multiply), pool, linear."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.c1 = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU6())
        self.c2 = nn.Sequential(nn.ZeroPad2d(1), nn.Conv2d(8, 8, 3, 2, 0, groups=8),
                                nn.BatchNorm2d(8),
                                nn.Hardswish(), nn.Conv2d(8, 16, 1, groups=2),
                                nn.BatchNorm2d(16), nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 4, 1), nn.ReLU(),
                                nn.Conv2d(4, 16, 1), nn.Hardsigmoid())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        # avg_pool2d counting its padding: exported as a Pad of zeros and an AveragePool.
        x = self.c2(torch.nn.functional.avg_pool2d(self.c1(x), 3, 1, 1))
        x = x * self.se(x)
        return self.fc(x.mean((2, 3)))


def make_model(name, kwargs=None):
    torch.manual_seed(25)
    model = Mobile() if name == "mobile" else pytorch_train.MODELS[name](**(kwargs or {}))
    return perturb(model).eval()


def perturb(model):
    """`model` with batch norm's statistics, the norms' affines and the attention's and
    linear layers' biases moved away from their initial 0/1, so that they matter (and the
    exporter shares no initializer between them)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
            if isinstance(m, torch.nn.MultiheadAttention):
                m.in_proj_bias.uniform_(-0.2, 0.2)
                m.out_proj.bias.uniform_(-0.2, 0.2)
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.uniform_(-0.2, 0.2)
    return model


def tandem(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"tandem {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")


def run_onnx(cli, path, x, tmp, tag):
    """`tandem run` of the model at `path` on images x; its output."""
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), "x"), os.path.join(tmp, f"in_{tag}.pb"))
    out = os.path.join(tmp, f"out_{tag}")
    tandem(cli, "run", path, "--input", f"x={tmp}/in_{tag}.pb", "--output-dir", out)
    return numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))


def relative(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def check(cli, name, label, kwargs, mode, batch, tmp, opset=None):
    model = make_model(name, kwargs)
    x = torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        want = model(x).numpy()
        want_one = model(x[:1]).numpy()
    path = os.path.join(tmp, f"{label}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, training=mode, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, opset_version=opset)
    proto = onnx.load(path)
    ops = sorted({n.op_type for n in proto.graph.node} - {"Identity"})
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    got = run_onnx(cli, path, x, tmp, "batch")
    if got.shape != want.shape:
        return f"{label} {mode.name}: output {list(got.shape)}, PyTorch's {list(want.shape)}"
    rel = relative(got, want)
    one = run_onnx(cli, path, x[:1], tmp, "one")
    rel_one = relative(one, want_one) if one.shape == want_one.shape else float("inf")
    print(f"{label} ({mode.name}, opset {opset}: {', '.join(ops)}): batch {batch}, max |diff| / "
          f"max |output| = {rel:.2e}; batch 1: {rel_one:.2e}")
    if not rel <= TOLERANCE:
        return f"{label} {mode.name}: relative difference {rel:.2e} > {TOLERANCE}"
    if not rel_one <= TOLERANCE:
        return (f"{label} {mode.name}: on one image, output {list(one.shape)} with relative "
                f"difference {rel_one:.2e} (PyTorch's {list(want_one.shape)})")
    # The same model through `tandem import` and the .tir: the same outputs.
    tir = os.path.join(tmp, f"{label}.tir")
    tandem(cli, "import", path, "-o", tir, "--batch", str(batch))
    out_tir = os.path.join(tmp, "out_tir")
    tandem(cli, "run", tir, "--input", f"x={tmp}/in_batch.pb", "--output-dir", out_tir)
    again = numpy_helper.to_array(onnx.load_tensor(os.path.join(out_tir, "output_0.pb")))
    if not np.array_equal(again, got):
        return f"{label} {mode.name}: the imported .tir gives other outputs than the .onnx"
    return None


def last_epoch(csv_path):
    with open(csv_path) as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    return dict(zip(rows[0], rows[-1]))


def export_to_train(model, path):
    """`model` as `train --onnx` reads it: the training structure kept, the batch open."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.randn(2, 1, 28, 28), path, input_names=["x"],
                          output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}},
                          training=torch.onnx.TrainingMode.PRESERVE)
    return path


def check_training(cli, tmp):
    """train --onnx of PyTorch's LeNet (kept structure, --reinit) on two devices learns as
    the zoo's LeNet does with the same flags."""
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("training: skipped: no Fashion-MNIST (dataset-fashion-mnist)")
        return None
    path = export_to_train(make_model("lenet"), os.path.join(tmp, "lenet_train.onnx"))
    flags = ["--devices", "cpu:0,cpu:1", "--batch", "128", "--epochs", "3", "--limit-train",
             "5000", "--limit-test", "2000"]
    acc = {}
    for name, source in (("zoo", ["--model", "lenet"]), ("onnx", ["--onnx", path, "--reinit"])):
        csv = os.path.join(tmp, f"{name}.csv")
        tandem(cli, "train", *source, *flags, "--metrics", csv)
        acc[name] = float(last_epoch(csv)["test_acc"])
    print(f"lenet training, 2 devices, 3 epochs on 5000 images: test accuracy zoo {acc['zoo']:.4f}, "
          f"imported from PyTorch (--reinit) {acc['onnx']:.4f}")
    if acc["onnx"] < acc["zoo"] - 0.05:
        return f"train --onnx lenet: test accuracy {acc['onnx']:.4f}, the zoo's {acc['zoo']:.4f}"
    return None


class Bounded(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def check_bounded(cli, tmp):
    """A Clip of any bounds (torch.clamp, F.hardtanh) and a HardSigmoid of another slope
    (written by hand: PyTorch does not vary it) run as PyTorch and numpy compute them."""
    x = torch.randn(2, 3) * 3
    cases = [("clamp(-1, 1)", Bounded(lambda v: torch.clamp(v, -1.0, 1.0))),
             ("hardtanh(0, 2)", Bounded(lambda v: torch.nn.functional.hardtanh(v, 0.0, 2.0)))]
    for i, (label, model) in enumerate(cases):
        path = os.path.join(tmp, f"bounded{i}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, x, path, input_names=["x"])
        err = relative(run_onnx(cli, path, x, tmp, f"bounded{i}"), model(x).numpy())
        if err > TOLERANCE:
            return f"{label}: {err:.2e} from PyTorch's"
        print(f"{label:28} ok {err:.2e}")
    node = onnx.helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.2, beta=0.5)
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    path = os.path.join(tmp, "hardsigmoid.onnx")
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    want = np.clip(np.float32(0.2) * x.numpy() + np.float32(0.5), 0, 1)
    err = relative(run_onnx(cli, path, x, tmp, "hardsigmoid"), want)
    if err > TOLERANCE:
        return f"HardSigmoid alpha 0.2: {err:.2e} from numpy's"
    print(f"{'HardSigmoid(0.2, 0.5)':28} ok {err:.2e}")
    return None


def masked(v):
    """Comparisons, logic, selections and remainders of values computed at run time."""
    y = torch.where(v > 0.5, v, v * 0.1)
    z = torch.fmod(y, 0.7)
    keep = (z < 0.2) | ~(v >= -1.0)
    out = torch.where(keep, z, -z) + (v == v.floor()).float()
    out = out.masked_fill(v.abs() > 2.5, -3.0)
    out[:, 1] = v[:, 0] * 2  # index_put: ScatterND of run-time values
    return out


def check_masked(cli, tmp):
    """A model computing masks at run time (torch.where, comparisons, |, ~, fmod,
    masked_fill, an assignment to a column: ONNX's Greater, Less, Equal, Or, Not, Where, Mod,
    Cast, ScatterND) as PyTorch does."""
    x = torch.randn(4, 5) * 2
    x[0, :3] = torch.tensor([1.0, -1.0, 0.5])  # equalities and the bounds themselves
    model = Bounded(masked)
    path = os.path.join(tmp, "masked.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, input_names=["x"], opset_version=17,
                          dynamic_axes={"x": {0: "N"}})
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    for batch in (4, 1):
        err = relative(run_onnx(cli, path, x[:batch], tmp, f"masked{batch}"), model(x[:batch]).numpy())
        if err > TOLERANCE:
            return f"masks at run time, batch {batch}: {err:.2e} from PyTorch's"
    print(f"{'masks at run time':28} ok {err:.2e} ({', '.join(ops)})")
    return None


def check_vit_replicated(cli, tmp):
    """train --onnx of PyTorch's ViT with nn.MultiheadAttention (sequence-first: its reshapes
    fold the batch into a middle axis, [T, N*heads, dim] and [T*N, D]) on two devices learns,
    and as on one device: data-parallel is the same math, up to f32 reduction order."""
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("vit training: skipped: no Fashion-MNIST (dataset-fashion-mnist)")
        return None
    path = export_to_train(make_model("vit", {"attention": "mha"}),
                           os.path.join(tmp, "vit_train.onnx"))
    flags = ["--onnx", path, "--batch", "64", "--epochs", "2", "--limit-train", "2048",
             "--limit-test", "512"]
    got = {}
    for devices in ("cpu:0,cpu:1", "cpu:0"):
        csv = os.path.join(tmp, f"vit_{len(devices.split(','))}.csv")
        tandem(cli, "train", *flags, "--devices", devices, "--metrics", csv)
        got[devices] = last_epoch(csv)
    two, one = got["cpu:0,cpu:1"], got["cpu:0"]
    loss2, loss1 = float(two["train_loss"]), float(one["train_loss"])
    acc2, acc1 = float(two["test_acc"]), float(one["test_acc"])
    print(f"vit (nn.MultiheadAttention) training, 2 epochs on 2048 images: train loss 2 devices "
          f"{loss2:.6f}, 1 device {loss1:.6f}; test accuracy {acc2:.4f}, {acc1:.4f}")
    if not acc2 > 0.2:
        return f"train --onnx vit on 2 devices: test accuracy {acc2:.4f}, not past chance (0.1)"
    if not abs(loss2 - loss1) <= 1e-3 * abs(loss1) or abs(acc2 - acc1) > 0.02:
        return (f"train --onnx vit: 2 devices (loss {loss2:.6f}, accuracy {acc2:.4f}) differ from "
                f"one (loss {loss1:.6f}, accuracy {acc1:.4f})")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tandem", default="build/tools/tandem")
    ap.add_argument("--models", default="lenet,resnet18,vit,mobile",
                    help=f"comma-separated, of {', '.join(VARIANTS)} (vit: both attentions)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--opset", type=int, default=None,
                    help="the opset torch.onnx.export writes (default: its own, 14; 17 writes "
                         "nn.LayerNorm as LayerNormalization)")
    ap.add_argument("--train", action="store_true",
                    help="also train the imported LeNet on two devices against the zoo's")
    args = ap.parse_args()
    torch.set_num_threads(1)
    failures = []

    def run(check_fn, *check_args):
        """Runs one check; its failure (returned or raised) is printed and counted."""
        try:
            failure = check_fn(*check_args)
        except RuntimeError as e:
            failure = str(e)
        if failure:
            print(f"FAILED {failure}")
            failures.append(failure)

    with tempfile.TemporaryDirectory(prefix="pytorch-onnx.") as tmp:
        for name in args.models.split(","):
            if name not in VARIANTS:
                ap.error(f"--models: '{name}' is not one of {', '.join(VARIANTS)}")
            for label, kwargs in VARIANTS[name]:
                for mode in (torch.onnx.TrainingMode.EVAL, torch.onnx.TrainingMode.PRESERVE):
                    run(check, args.tandem, name, label, kwargs, mode, args.batch, tmp,
                        args.opset)
        if "vit" in args.models.split(","):
            run(check_vit_replicated, args.tandem, tmp)
        if "mobile" in args.models.split(","):
            run(check_bounded, args.tandem, tmp)
            run(check_masked, args.tandem, tmp)
        if args.train:
            run(check_training, args.tandem, tmp)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
