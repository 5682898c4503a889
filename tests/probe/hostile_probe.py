#!/usr/bin/python3
"""A hostile probe of the tandem CLI: hundreds of bad, odd and edge-case inputs to run,
import, export, train (zoo models and --onnx), the optimizer and schedule flags and
--resume, each run with a timeout and sorted into one class:

  crash                  killed by a signal, or an exit code >= 128
  hang                   still running at the timeout
  accepted-bad-input     exit 0 where it must refuse
  rejected-good-input    a refusal (or any failure) where the input is legal
  wrong-exit-code        a refusal with another code than README's table gives
  message-not-one-line-or-unnamed
                         a failure whose standard error is not one line 'tandem: ...', or
                         that does not name the flag, file or node at fault
  data-lost              an input or a file that was there before changed or removed, or
                         leftovers (*.tmp*, checkpoint.lock, a half-written output) after a
                         refused run
  nan-undetected         a train that must stop with exit 3 (a NaN or infinite loss) ends
                         with exit 0, or prints a non-finite figure
  wrong-result           `run` accepted a model and computed other numbers than PyTorch
  ok

Every case makes its own inputs in a scratch directory (Fashion-MNIST-shaped IDX files,
tiny ONNX models written with onnx.helper, .tir files from `tandem import` edited by hand,
checkpoints of a 1-epoch run). It prints a table class -> count, then every case that is not
ok with its command and what was seen, and exits 1 if there is one.

  /usr/bin/python3 tests/probe/hostile_probe.py --tandem build/tools/tandem [--jobs 2]
      [--list] [--only NAME_SUBSTRING (repeatable; --only=-x for one that starts with -)]
      [--timeout 60] [--keep] [-v]

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy; python3-torch for the
oracle of `run`'s results, which is skipped without it).
"""

import argparse
import concurrent.futures
import gzip
import hashlib
import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the oracle of run's numbers is skipped
    torch = None

CLASSES = [
    "crash", "hang", "accepted-bad-input", "rejected-good-input", "wrong-exit-code",
    "message-not-one-line-or-unnamed", "data-lost", "nan-undetected", "wrong-result", "ok"
]
LEFTOVER = re.compile(r"(\.tmp|^\.tandem|\.partial|~$)")  # left by any run
LEFTOVER_REFUSED = re.compile(r"\.lock$")  # a successful run keeps checkpoint.lock
MAX_LINE = 1000  # a message longer than this quotes too much of its input

# ---------------------------------------------------------------------------------------
# Inputs


def put_be(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def idx_images(count, rows=28, cols=28, magic=0x803, header_count=None, seed=0):
    body = bytes((i * 7 + seed) % 256 for i in range(count * rows * cols))
    hc = count if header_count is None else header_count
    return put_be(magic) + put_be(hc) + put_be(rows) + put_be(cols) + body


def idx_labels(count, magic=0x801, header_count=None, labels=None):
    lab = bytes(labels) if labels is not None else bytes(i % 10 for i in range(count))
    hc = count if header_count is None else header_count
    return put_be(magic) + put_be(hc) + lab


def write_data(d, train=60, test=30, rows=28, cols=28, **over):
    """A Fashion-MNIST-shaped directory; `over` replaces any of its four files' bytes
    (key: 'train-images' ...; value bytes, or None to leave the file out)."""
    os.makedirs(d, exist_ok=True)
    files = {
        "train-images": idx_images(train, rows, cols),
        "train-labels": idx_labels(train),
        "t10k-images": idx_images(test, rows, cols, seed=3),
        "t10k-labels": idx_labels(test),
    }
    files.update(over)
    for key, data in files.items():
        if data is None:
            continue
        split, kind = key.split("-")
        name = f"{split}-{kind}-idx{3 if kind == 'images' else 1}-ubyte"
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return d


RNG = np.random.default_rng(1234)


def tensor(name, arr, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(arr, dtype=dtype), name)


def vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=14, ir_version=8, name="probe"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    m.producer_name = "hostile_probe"
    return m


def mlp_model(batch="N", hidden=32, classes=10, w1=None, w2=None, in_name="x",
              out_name="logits", opset=14, relu_name="relu", extra_out=False, softmax=False):
    rng = np.random.default_rng(1234)  # the same weights in every run and thread
    w1 = rng.normal(0, 0.05, (hidden, 784)).astype(np.float32) if w1 is None else w1
    w2 = rng.normal(0, 0.05, (classes, hidden)).astype(np.float32) if w2 is None else w2
    nodes = [
        helper.make_node("Flatten", [in_name], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["hr"], name=relu_name),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["z" if softmax else out_name], name="fc2",
                         transB=1),
    ]
    if softmax:
        nodes.append(helper.make_node("Softmax", ["z"], [out_name], name="softmax", axis=1))
    inits = [tensor("w1", w1), tensor("b1", np.zeros(w1.shape[0])), tensor("w2", w2),
             tensor("b2", np.zeros(w2.shape[0]))]
    outs = [vi(out_name, shape=[batch, classes])]
    if extra_out:
        outs.append(vi("hr", shape=[batch, hidden]))
    return model(nodes, [vi(in_name, shape=[batch, 1, 28, 28])], outs, inits, opset=opset)


def scaled_model(factor, batch="N"):
    """The mlp times a constant: Mul by a one-element initializer."""
    m = mlp_model(batch=batch)
    m.graph.node[-1].output[0] = "z"
    m.graph.node.append(helper.make_node("Mul", ["z", "factor"], ["logits"], name="scale"))
    m.graph.initializer.append(tensor("factor", np.float32(factor)))
    return m


def cnn_model(batch="N"):
    rng = np.random.default_rng(4321)
    w1 = rng.normal(0, 0.2, (4, 1, 3, 3)).astype(np.float32)
    w2 = rng.normal(0, 0.1, (8, 4, 3, 3)).astype(np.float32)
    w3 = rng.normal(0, 0.05, (10, 288)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "cw1", "cb1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "cw2", "cb2"], ["c2"], name="conv2", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("AveragePool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["logits"], name="fc", transB=1),
    ]
    inits = [tensor("cw1", w1), tensor("cb1", np.zeros(4)), tensor("cw2", w2),
             tensor("cb2", np.zeros(8)), tensor("fw", w3), tensor("fb", np.zeros(10))]
    return model(nodes, [vi("x", shape=[batch, 1, 28, 28])], [vi("logits", shape=[batch, 10])],
                 inits)


def single_op_model(op, attrs, w=None, b=None, x_shape=("N", 1, 28, 28)):
    """One Conv (weights w, bias b) / MaxPool / AveragePool on x, output y of unknown shape."""
    inputs = ["x"]
    inits = []
    if op == "Conv":
        inits = [tensor("w", w), tensor("b", b)]
        inputs = ["x", "w", "b"]
    node = helper.make_node(op, inputs, ["y"], name="op", **attrs)
    return model([node], [vi("x", shape=list(x_shape))], [vi("y", shape=[None] * 4)], inits)


def save(m, path):
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def save_tensor(arr, path, name="x", dtype=np.float32):
    t = numpy_helper.from_array(np.asarray(arr, dtype=dtype), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())
    return path


def images(n, seed=7):
    return np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)


# ---------------------------------------------------------------------------------------
# Cases


class Case:
    """expect: 'ok' (exit 0), 'refuse' (exit 2, or 5 for what the machine refuses), 'nan'
    (exit 3), 'any' (0 or a refusal, but never a crash, hang, bad message or lost data).
    args: the command after the binary; '$D' is the case's scratch directory, '$F' the
    shared fixtures'. names: the error line must contain one of these (default: a flag or
    a path of the command). prep(D): makes the case's inputs. may_change: files of D a
    successful run may rewrite. allow_new: files a refused run may leave (globs).
    check(case, D, rc, out, err) -> [(class, detail)]: more checks. user: run as this user.
    shell: args is one shell line (run by /bin/sh -c) instead."""

    def __init__(self, name, args, expect="refuse", names=None, prep=None, may_change=(),
                 allow_new=(), check=None, timeout=None, user=None, shell=False, known=None):
        self.name, self.args, self.expect, self.names = name, args, expect, names
        self.prep, self.may_change, self.allow_new = prep, may_change, allow_new
        self.check, self.timeout, self.user, self.shell = check, timeout, user, shell
        self.known = known  # the known defect it probes, if any (said in the report)


CASES = []
SEEN = set()


def case(name, args, **kw):
    assert name not in SEEN, name
    SEEN.add(name)
    CASES.append(Case(name, args, **kw))


def cp(*rel):
    """prep: copy fixtures (relative to $F) into D under the same names."""

    def prep(D):
        for r in rel:
            src = os.path.join(FIX, r)
            dst = os.path.join(D, r)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)

    return prep


def chain(*preps):
    def prep(D):
        for p in preps:
            if p:
                p(D)

    return prep


def fifo(rel):
    def prep(D):
        p = os.path.join(D, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        os.mkfifo(p)

    return prep


def mkdir(rel, mode=0o755):
    def prep(D):
        p = os.path.join(D, rel)
        os.makedirs(p, exist_ok=True)
        os.chmod(p, mode)

    return prep


def write(rel, data):
    def prep(D):
        p = os.path.join(D, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data() if callable(data) else data)

    return prep


def symlink(target, rel):
    def prep(D):
        os.symlink(target.replace("$D", D).replace("$F", FIX), os.path.join(D, rel))

    return prep


def hardlink(src_rel, rel):
    def prep(D):
        os.link(os.path.join(D, src_rel), os.path.join(D, rel))

    return prep


def onnx_file(rel, make):
    return write(rel, lambda: make().SerializeToString())


FIX = None  # the fixtures' directory, set in main
CK_FLAGS = ["--schedule", "constant", "--warmup", "0"]
TRAIN = ["--data", "$F/data", "--limit-train", "20", "--limit-test", "10", "--batch", "10",
         "--epochs", "1"]


def merged(defaults, more):
    """defaults then more, a flag of `more` replacing the default of the same name."""
    given = {a for a in more if a.startswith("--")}
    out = []
    for i in range(0, len(defaults), 2):
        if defaults[i] not in given:
            out += defaults[i:i + 2]
    return out + list(more)


def train(*more, model="mlp"):
    return ["train", "--model", model] + merged(TRAIN, more)


def train_onnx(path, *more):
    return ["train", "--onnx", path] + merged(TRAIN, more)


# Checks beyond the exit code ----------------------------------------------------------------


def output_has_nan(D, rel="out/output_0.pb"):
    """check: run's output must hold a NaN (the input or a weight held one)."""

    def check(c, D_, rc, out, err):
        if rc != 0:
            return []
        p = os.path.join(D_, rel)
        try:
            arr = numpy_helper.to_array(onnx.load_tensor(p))
        except Exception as e:  # noqa: BLE001
            return [("wrong-result", f"cannot read {rel}: {e}")]
        if not np.isnan(arr).any():
            return [("nan-undetected",
                     f"a NaN went in, none came out of {rel} (min {arr.min()}, max {arr.max()})")]
        return []

    return check


def oracle(fn):
    """check: run's output_0.pb must equal fn() (numpy array, from PyTorch) within 1e-4
    relative; fn raising means the case has no defined answer (not compared)."""

    def check(c, D, rc, out, err):
        if rc != 0 or torch is None:
            return []
        try:
            want = fn()
        except Exception:  # noqa: BLE001  PyTorch refuses it too: no answer to compare
            return []
        try:
            got = numpy_helper.to_array(onnx.load_tensor(os.path.join(D, "out/output_0.pb")))
        except Exception as e:  # noqa: BLE001
            return [("wrong-result", f"cannot read out/output_0.pb: {e}")]
        if got.shape != want.shape:
            return [("wrong-result", f"shape {list(got.shape)}, PyTorch {list(want.shape)}")]
        fin = np.isfinite(want)
        if not np.array_equal(np.isfinite(got), fin) or not np.array_equal(
                np.isnan(got), np.isnan(want)):
            return [("wrong-result", "non-finite values differ from PyTorch's")]
        if fin.any():
            scale = max(float(np.abs(want[fin]).max()), 1e-30)
            rel = float(np.abs(got[fin] - want[fin]).max()) / scale
            if rel > 1e-4:
                return [("wrong-result", f"max |diff| / max |PyTorch| = {rel:.3g}")]
        return []

    return check


def epoch_rows_finite(c, D, rc, out, err):
    """check: a train that exits 0 prints no NaN or infinite figure."""
    if rc != 0:
        return []
    for line in out.splitlines():
        if re.search(r"\b(nan|-?inf)\b", line, re.I):
            return [("nan-undetected", f"exit 0 with the line {line!r}")]
    return []


def files_exist(*rels):
    def check(c, D, rc, out, err):
        if rc != 0:
            return []
        return [("rejected-good-input", f"exit 0 but {r} is missing")
                for r in rels if not os.path.exists(os.path.join(D, r))]

    return check


def both(*checks):
    def check(c, D, rc, out, err):
        found = []
        for ch in checks:
            found += ch(c, D, rc, out, err)
        return found

    return check


# ---------------------------------------------------------------------------------------
# The cases, by area


def add_cli_cases():
    case("cli/no-args", [], names=["subcommand"])
    case("cli/unknown-subcommand", ["frobnicate"], names=["frobnicate"])
    case("cli/help", ["--help"], expect="ok")
    for cmd in ["train", "import", "run", "export"]:
        case(f"cli/{cmd}-help", [cmd, "--help"], expect="ok")
    case("cli/version", ["--version"], expect="ok")
    case("cli/train-flag-twice", train("--lr", "0.1", "--lr", "0.1"), names=["--lr"])
    case("cli/train-flag-twice-eq", train("--lr=0.1", "--lr", "0.1"), names=["--lr"])
    case("cli/train-lr-eq", train("--lr=0.01"), expect="ok", check=epoch_rows_finite)
    case("cli/train-lr-eq-empty", train("--lr="), names=["--lr"])
    case("cli/train-misspelt", train("--learning-rate", "0.1"), names=["--learning-rate"])
    case("cli/train-stray-positional", train("extra"), names=["extra"])
    case("cli/import-two-models", ["import", "$F/mlp.onnx", "$F/cnn.onnx", "-o", "$D/m.tir"],
         names=["cnn.onnx", "not expected"])
    case("cli/run-no-model", ["run", "--input", "x=$F/x2.pb", "--output-dir", "$D/out"],
         names=["model", "MODEL"])
    case("cli/export-flag-of-train", ["export", "--checkpoint", "$F/ck", "-o", "$D/m.onnx",
                                      "--lr", "0.1"], names=["--lr"])
    case("cli/train-batch-twice-same-value", train() + ["--batch", "10"], names=["--batch"])


def add_range_cases():
    """Every number flag of train at and past its range's edges, values that round in
    f32, whitespace, other spellings."""
    R = "refuse"

    def t(name, flags, expect=R, names=None, model="mlp", **kw):
        n = names if names is not None else [flags[0]]
        # a train that exits 0 prints finite figures, unless --allow-nonfinite lets it go on
        finite = [] if "--allow-nonfinite" in flags else [epoch_rows_finite]
        ch = both(*finite, *([kw.pop("check")] if "check" in kw else []))
        case("train-range/" + name, train(*flags, model=model), expect=expect, names=n,
             check=ch, **kw)

    # --batch (the fixtures hold 20 training images with --limit-train 20)
    t("batch-1", ["--batch", "1", "--limit-train", "5", "--limit-test", "2"], "any")
    case("train-range/batch-1-ok", ["train", "--model", "mlp", "--data", "$F/data",
                                    "--limit-train", "3", "--limit-test", "2", "--batch", "1",
                                    "--epochs", "1"], expect="ok")
    for v in ["0", "-1", "2147483649", " 10", "10 ", "1e1", "0x10", "10.0", "", "ten"]:
        case(f"train-range/batch-{v!r}", ["train", "--model", "mlp", "--data", "$F/data",
                                          "--limit-train", "20", "--limit-test", "10", "--epochs",
                                          "1", "--batch", v],
             expect="any" if v in (" 10", "10 ") else R, names=["--batch"])
    case("train-range/batch-max", ["train", "--model", "mlp", "--data", "$F/data", "--epochs", "1",
                                   "--batch", "2147483648"], names=["--batch"])
    case("train-range/batch-plus", ["train", "--model", "mlp", "--data", "$F/data", "--limit-train",
                                    "20", "--limit-test", "10", "--epochs", "1", "--batch", "+10"],
         expect="any", names=["--batch"])
    # --devices
    for v, e in [("2", "ok"), ("3", "ok"), ("cpu:0,cpu:1", "ok"), ("1025", R), ("0", R),
                 ("-1", R), ("cpu:0,cpu:0", "any"), ("cpu:0,", R), (",", R), ("cpu:", R),
                 ("cpu:+1", "any"), ("cpu:01", "any"), ("2,", R), ("cuda:0", R), ("gpu:0", R),
                 ("cpu:0 ,cpu:1", "any"), ("cpu:0;cpu:1", R), ("1e1", R),
                 ("cpu:2147483648", R)]:
        t(f"devices-{v!r}", ["--devices", v], e)
    t("devices-space-2", ["--devices", " 2"], "ok", known="--devices ' 2' refused")
    t("devices-cpu1024", ["--devices", "cpu:1024"], R, known="cpu:1024 accepted")
    t("devices-10-batch-10", ["--devices", "10"], "ok")
    t("devices-11-batch-10", ["--devices", "11"], R, names=["--devices", "--batch"])
    # uneven batches on several devices
    for b, d in [(3, 2), (5, 3), (7, 4), (9, 2), (10, 3)]:
        case(f"train-range/batch-{b}-devices-{d}",
             ["train", "--model", "mlp", "--data", "$F/data", "--limit-train", "20",
              "--limit-test", "10", "--epochs", "1", "--batch", str(b), "--devices", str(d)],
             expect="ok", check=epoch_rows_finite,
             known="batch 3 on 2 devices fails (oneDNN reduction primitive)" if b == 3 else None)
    case("train-range/vit-batch-3-devices-2",
         ["train", "--model", "vit", "--data", "$F/data", "--limit-train", "6", "--limit-test",
          "3", "--epochs", "1", "--batch", "3", "--devices", "2"], expect="ok",
         check=epoch_rows_finite,
         known="batch 3 on 2 devices fails (oneDNN reduction primitive)")
    case("train-range/lenet-batch-3-devices-2",
         ["train", "--model", "lenet", "--data", "$F/data", "--limit-train", "20", "--limit-test",
          "10", "--epochs", "1", "--batch", "3", "--devices", "2"], expect="ok",
         check=epoch_rows_finite)
    # --lr (sgd and adamw)
    for v, e in [("1e-38", R), ("1.17549e-38", "any"), ("1.2e-38", "ok"), ("1e-45", R),
                 ("3.5e38", R), ("-0", R), ("0x1p-3", "any"), ("1,5", R), ("", R), (" 0.1", "any"),
                 ("0.1 ", "any"), ("0.1\n", "any"), ("1e-1", "ok"), ("+0.1", "any"),
                 ("nan", R), ("-inf", R), ("1e400", R), ("0.0000000000000000000000000000000001",
                                                          "ok")]:
        t(f"lr-{v!r}", ["--lr", v], e)
    t("lr-3e38-sgd", ["--lr", "3e38", "--optimizer", "sgd"], "nan")
    t("lr-3e38-adamw", ["--lr", "3e38"], "any")
    t("lr-3e38-lenet", ["--lr", "3e38", "--epochs", "3"], "nan", model="lenet")
    # --momentum (sgd)
    S = ["--optimizer", "sgd"]
    for v, e in [("0", "ok"), ("0.99999", "ok"), ("0.99999999", R), ("1", R), ("-0", "any"),
                 ("1e-50", R), ("-1e-50", R), ("0.9 ", "any")]:
        t(f"momentum-{v!r}", S + ["--momentum", v], e, names=["--momentum"])
    t("momentum-with-adamw", ["--momentum", "0.9"], R, names=["--momentum"])
    # --weight-decay
    for v, e in [("0", "ok"), ("1", "ok"), ("1.0000001", R), ("1.00000001", "any"),
                 ("1e-50", R), ("-1e-50", R), ("2e-38", "ok"), ("-0", "any")]:
        t(f"weight-decay-{v!r}", ["--weight-decay", v], e, names=["--weight-decay"])
        t(f"weight-decay-sgd-{v!r}", S + ["--weight-decay", v], e, names=["--weight-decay"])
    # AdamW's betas and eps
    for flag in ["--beta1", "--beta2"]:
        for v, e in [("0", "ok"), ("0.999999999", R), ("1", R), ("-0.1", R), ("1e-50", R),
                     ("0.9999999", "any"), ("nan", R)]:
            t(f"{flag[2:]}-{v!r}", [flag, v], e, names=[flag])
        t(f"{flag[2:]}-with-sgd", S + [flag, "0.9"], R, names=[flag])
    for v, e in [("0", "any"), ("1e-50", R), ("1e-45", R), ("1e39", R), ("-0", "any"),
                 ("1", "ok"), ("3e38", "ok")]:
        t(f"eps-{v!r}", ["--eps", v], e, names=["--eps"])
    t("eps-sgd", S + ["--eps", "1e-8"], R, names=["--eps"])
    # --optimizer
    for v, e in [("sgd", "ok"), ("adamw", "ok"), ("SGD", R), ("", R), ("adamw ", "any"),
                 ("sgd,adamw", R)]:
        t(f"optimizer-{v!r}", ["--optimizer", v], e, names=["--optimizer"])
    # --schedule
    for v, e in [("constant", "ok"), ("cosine", "ok"), ("step:1:0.5", "ok"), ("step:1:1", "ok"),
                 ("step:0:0.5", R), ("step:-1:0.5", R), ("step:1:0", R), ("step:1:1e-50", R),
                 ("step:1:nan", R), ("step:1:inf", R), ("step:1", R), ("step:1:0.5:3", R),
                 ("step::0.5", R), ("step:1e9:0.5", R), ("step:99999999999999999999:0.5", R),
                 ("step:100000:0.5", "ok"), ("cosine:1", R), ("Cosine", R), ("", R),
                 ("step:1:1.0000001", R), ("step:1:0.99999999", "any"), ("step: 1:0.5", "any"),
                 ("step:1:-0.5", R)]:
        t(f"schedule-{v!r}", ["--schedule", v], e, names=["--schedule"])
    # --warmup (2 steps in a 20-image, batch-10 epoch)
    for v, e in [("0", "ok"), ("1", "ok"), ("2", R), ("1099511627776", R),
                 ("1099511627777", R), ("-1", R), ("1.5", R), ("99999999999999999999", R)]:
        t(f"warmup-{v!r}", ["--warmup", v], e, names=["--warmup"])
    t("warmup-constant", ["--schedule", "constant", "--warmup", "1"], "ok", names=["--warmup"])
    t("warmup-constant-many", ["--schedule", "constant", "--warmup", "5"], "any",
      names=["--warmup"])
    # --clip-grad-norm
    for v, e in [("1e-50", R), ("1e-45", R), ("1e-38", "any"), ("0", R), ("1e9", "ok"),
                 ("1.0000001e9", R), ("nan", R), ("inf", R), ("-1", R), ("1", "ok")]:
        t(f"clip-grad-norm-{v!r}", ["--clip-grad-norm", v], e, names=["--clip-grad-norm"],
          known="--clip-grad-norm 1e-50 accepted" if v == "1e-50" else None)
    # --label-smoothing
    for v, e in [("0", "ok"), ("0.99999999", R), ("0.9999999", "ok"), ("1e-50", R),
                 ("-0", "any"), ("0.5", "ok"), ("1e-45", R)]:
        t(f"label-smoothing-{v!r}", ["--label-smoothing", v], e, names=["--label-smoothing"],
          known="--label-smoothing 0.99999999 accepted" if v == "0.99999999" else None)
    # --init
    for v, e in [("kaiming", "ok"), ("normal:0.01", "ok"), ("normal:1e-50", R),
                 ("normal:1e-45", R), ("normal:100", "ok"), ("normal:100.00001", R),
                 ("normal:0", R), ("normal:nan", R), ("normal:inf", R), ("normal:", R),
                 ("normal", R), ("normal:0.01:3", R), ("Kaiming", R), ("normal: 0.01", "any"),
                 ("normal:1e-38", "any"), ("zeros", "any")]:
        t(f"init-{v!r}", ["--init", v], e, names=["--init"],
          known="--init normal:1e-50 accepted" if v == "normal:1e-50" else None)
    # bucket sizes
    for flag in ["--bucket-mb", "--first-bucket-mb"]:
        for v, e in [("0", R), ("1e-50", "any"), ("1e9", "ok"), ("1.000001e9", R), ("nan", R),
                     ("0.000001", "ok")]:
            t(f"{flag[2:]}-{v!r}", ["--devices", "2", flag, v], e, names=[flag])
    for v, e in [("1", "ok"), ("2", "ok"), ("3", R), ("4", R), ("0", R), ("1025", R)]:
        t(f"allreduce-groups-{v}", ["--devices", "4", "--allreduce-groups", v], e,
          names=["--allreduce-groups"])
    for v, e in [("1", "ok"), ("0", R), ("1025", R), ("4", "ok"), ("-1", R)]:
        t(f"threads-per-device-{v}", ["--threads-per-device", v], e,
          names=["--threads-per-device"])
    for v, e in [("2", "ok"), ("0", R), ("100001", R), ("-1", R), ("1e1", R)]:
        case(f"train-range/epochs-{v}", ["train", "--model", "mlp", "--data", "$F/data",
                                         "--limit-train", "20", "--limit-test", "10", "--batch",
                                         "10", "--epochs", v], expect=e, names=["--epochs"])
    for v, e in [("18446744073709551615", "ok"), ("18446744073709551616", R), ("-0", "any"),
                 (" 1", "any"), ("1.0", R)]:
        t(f"seed-{v!r}", ["--seed", v], e, names=["--seed"])
    for v, e in [("1", R), ("60", "ok"), ("61", R), ("0", R)]:
        case(f"train-range/limit-train-{v}", ["train", "--model", "mlp", "--data", "$F/data",
                                              "--limit-test", "10", "--batch", "10", "--epochs",
                                              "1", "--limit-train", v], expect=e,
             names=["--limit-train", "--batch"])
    for v, e in [("1", "ok"), ("30", "ok"), ("31", R)]:
        case(f"train-range/limit-test-{v}", ["train", "--model", "mlp", "--data", "$F/data",
                                             "--limit-train", "20", "--batch", "10", "--epochs",
                                             "1", "--limit-test", v], expect=e,
             names=["--limit-test"])
    for v, e in [("bf16", "ok"), ("BF16", R), ("f16", R), ("f32", "ok")]:
        t(f"precision-{v}", ["--precision", v], e, names=["--precision"])
    t("allreduce-dtype-bf16", ["--devices", "2", "--allreduce-dtype", "bf16"], "ok")
    for v, e in [("on", "ok"), ("off", "ok"), ("auto", "ok"), ("ON", R)]:
        t(f"group-updates-{v}", ["--group-updates", v], e, names=["--group-updates"])
    for v, e in [("even", "ok"), ("1,1", "ok"), ("3,1", "ok"), ("auto", "ok"), ("1e-50,1", "any"),
                 ("inf,1", R), ("nan,1", R), ("1,1,", R), ("99999999999999999999,1", "any"),
                 ("-1,2", R)]:
        t(f"split-{v!r}", ["--devices", "2", "--split", v], e, names=["--split"])
    t("shard-updates-2", ["--devices", "2", "--shard-updates"], "ok")
    t("sync-bn-mlp", ["--sync-bn", "--devices", "2"], "ok")
    t("no-fuse-plain-no-recompute", ["--no-fuse", "--plain-layout", "--no-recompute"], "ok")
    t("conv-algorithm-direct", ["--conv-algorithm", "direct"], "ok", model="lenet")
    for v, e in [("86400", "ok"), ("86401", R), ("1e-50", "any"), ("0", R)]:
        t(f"collective-timeout-{v}", ["--collective-timeout", v], e, names=["--collective-timeout"])
    t("profile", ["--profile"], "ok")
    t("allow-nonfinite-lr-3e38", ["--lr", "3e38", "--optimizer", "sgd", "--allow-nonfinite"],
      "ok")
    # the same settings in the lenet (sgd, batch norm-free CNN)
    for flags, e in [(["--momentum", "0.99999999"], R), (["--lr", "1e-45"], R),
                     (["--clip-grad-norm", "1e-50"], R), (["--init", "normal:1e-50"], R),
                     (["--label-smoothing", "0.99999999"], R), (["--schedule", "cosine"], "ok"),
                     (["--schedule", "step:1:0.1", "--warmup", "1"], "ok")]:
        t("lenet-" + "-".join(x.strip("-") for x in flags), flags, e, model="lenet")
    # lenet_bn and --sync-bn
    t("lenet_bn-sync-bn-2", ["--sync-bn", "--devices", "2"], "ok", model="lenet_bn")
    t("lenet_bn-batch-3-devices-2", ["--batch", "3", "--devices", "2", "--limit-train", "9"],
      "ok", model="lenet_bn", names=["--batch"])


def add_checkpoint_cases():
    # $F/ck: 1 epoch of the mlp with a constant learning rate (CK_FLAGS), which a second
    # epoch continues as if never stopped; $F/ck_cos: 1 epoch of its default cosine schedule.
    base = ["train", "--model", "mlp", "--data", "$F/data", "--limit-train", "20",
            "--limit-test", "10", "--batch", "10"] + CK_FLAGS + ["--epochs", "2"]
    ck = cp("ck")
    good = lambda: open(os.path.join(FIX, "ck/checkpoint"), "rb").read()  # noqa: E731

    def damaged(fn):
        return write("bad/checkpoint", lambda: fn(good()))

    def flip(b, at):
        b = bytearray(b)
        b[at] ^= 0x04
        return bytes(b)

    def resume(name, damage, expect="refuse", names=("--resume", "$D/bad"), **kw):
        case(f"resume-damaged/{name}", base + ["--resume", "$D/bad"], expect=expect,
             names=list(names), prep=damage, **kw)

    for at in [0, 4, 8, 9, 12, 16, 64, 100]:
        resume(f"cut-{at}", damaged(lambda b, at=at: b[:at]))
    resume("cut-half", damaged(lambda b: b[:len(b) // 2]))
    resume("cut-minus-1", damaged(lambda b: b[:-1]))
    resume("cut-minus-4", damaged(lambda b: b[:-4]))
    for frac in [0.1, 0.3, 0.5, 0.7, 0.9]:
        resume(f"flip-{frac}", damaged(lambda b, frac=frac: flip(b, int(len(b) * frac))))
    resume("flip-last", damaged(lambda b: flip(b, len(b) - 1)))
    resume("flip-version", damaged(lambda b: flip(b, 8)))
    resume("appended", damaged(lambda b: b + b"garbage"))
    resume("doubled", damaged(lambda b: b + b))
    resume("empty", write("bad/checkpoint", b""))
    resume("text", write("bad/checkpoint", b"epoch 3\n"))
    resume("magic-only", write("bad/checkpoint", b"TNDMCKPT"))
    resume("is-directory", mkdir("bad/checkpoint"))
    resume("is-fifo", fifo("bad/checkpoint"), timeout=20)
    resume("symlink-loop", chain(mkdir("bad"), symlink("$D/bad/checkpoint", "bad/checkpoint")))
    resume("symlink-dev-zero", chain(mkdir("bad"), symlink("/dev/zero", "bad/checkpoint")))
    resume("dangling-symlink", chain(mkdir("bad"), symlink("$D/nowhere", "bad/checkpoint")))
    resume("no-dir", lambda D: None)
    resume("dir-is-file", write("bad", b"x"))
    # A directory with the good checkpoint and leftovers of a killed run.
    for extra, data in [("checkpoint.lock", b""), ("checkpoint.lock", b"12345\n"),
                        (".checkpoint.tmp", b"half"), ("checkpoint.tmp.123", b"half")]:
        case(f"resume-leftover/{extra}-{len(data)}", base + ["--resume", "$D/ck"], expect="any",
             prep=chain(ck, write("ck/" + extra, data)), may_change=["ck/*"], names=["ck"])
    case("resume-leftover/lock-is-dir", base + ["--resume", "$D/ck"], expect="any",
         prep=chain(ck, lambda D: os.remove(os.path.join(D, "ck/checkpoint.lock")),
                    mkdir("ck/checkpoint.lock")), may_change=["ck/*"], names=["ck"])
    case("resume-leftover/lock-is-fifo", base + ["--resume", "$D/ck"], expect="any",
         prep=chain(ck, lambda D: os.remove(os.path.join(D, "ck/checkpoint.lock")),
                    fifo("ck/checkpoint.lock")), may_change=["ck/*"], names=["ck"], timeout=30)

    # Resume with each setting changed, one at a time: refused, naming the setting.
    changed = [
        (["--schedule", "cosine"], "--schedule"), (["--warmup", "1"], "--warmup"),
        (["--batch", "5"], "--batch"), (["--seed", "1"], "--seed"),
        (["--limit-train", "30"], "--limit-train"), (["--lr", "0.002"], "--lr"),
        (["--weight-decay", "0.02"], "--weight-decay"), (["--beta1", "0.8"], "--beta1"),
        (["--beta2", "0.99"], "--beta2"), (["--eps", "1e-7"], "--eps"),
        (["--optimizer", "sgd"], "--optimizer"),
        (["--schedule", "step:1:0.5"], "--schedule"), (["--warmup", "2"], "--warmup"),
        (["--clip-grad-norm", "1"], "--clip-grad-norm"),
        (["--label-smoothing", "0.1"], "--label-smoothing"), (["--precision", "bf16"],
                                                              "--precision"),
        (["--devices", "2", "--allreduce-dtype", "bf16"], "--allreduce-dtype"),
        (["--devices", "2", "--sync-bn"], "--sync-bn"), (["--model", "lenet"], "--model"),
        (["--lr", "0.0010000001"], "--lr"),
    ]
    for flags, flag in changed:
        args = list(base)
        if flags[0] == "--model":
            args[2] = flags[1]
            flags = []
        known = "resume with a changed --warmup blamed on --schedule" if flag == "--warmup" \
            else None
        case("resume-changed/" + "-".join(f.strip("-") for f in flags or ["model", "lenet"]),
             args[:1] + merged(args[1:], flags) + ["--resume", "$D/ck"], expect="refuse", names=[flag], prep=ck,
             known=known)
    # Settings a resumed run may change (they change no number of the run, or only its end).
    for flags in [["--devices", "2"], ["--limit-test", "5"], ["--init", "normal:0.01"],
                  ["--threads-per-device", "1"], ["--group-updates", "on"], ["--no-fuse"],
                  ["--bucket-mb", "1"], ["--devices", "2", "--shard-updates"],
                  ["--checkpoint", "$D/ck2"], ["--checkpoint", "$D/ck"],
                  ["--checkpoint-every", "1"], ["--metrics", "$D/m.csv"], []]:
        case("resume-same/" + ("-".join(f.strip("-").replace("$D/", "") for f in flags) or
                               "nothing"),
             base[:1] + merged(base[1:], flags) + ["--resume", "$D/ck"], expect="ok", prep=ck, may_change=["ck/*"],
             check=epoch_rows_finite)
    case("resume-same/epochs-3", base[:-1] + ["3", "--resume", "$D/ck"], expect="any", prep=ck,
         may_change=["ck/*"], names=["--epochs", "--schedule"])
    case("resume-same/epochs-1", base[:-1] + ["1", "--resume", "$D/ck"], expect="any", prep=ck,
         names=["--epochs"])
    # A finished cosine run extended: --epochs changes the schedule (and the model's warmup,
    # which follows the run's length); the line must say that --epochs is what differs.
    case("resume-cosine/epochs-2", ["train", "--model", "mlp", "--data", "$F/data",
                                    "--limit-train", "20", "--limit-test", "10", "--batch", "10",
                                    "--epochs", "2", "--resume", "$D/ck_cos"],
         expect="any", prep=cp("ck_cos"), may_change=["ck_cos/*"], names=["--epochs"])
    case("resume-cosine/epochs-1", ["train", "--model", "mlp", "--data", "$F/data",
                                    "--limit-train", "20", "--limit-test", "10", "--batch", "10",
                                    "--epochs", "1", "--resume", "$D/ck_cos"],
         expect="any", prep=cp("ck_cos"), may_change=["ck_cos/*"], names=["--epochs"])
    case("resume-same/copy-elsewhere-ro-source",
         base + ["--resume", "$D/ck", "--checkpoint", "$D/ck2"], expect="ok", prep=ck,
         check=files_exist("ck2/checkpoint"))
    # --checkpoint flags
    case("checkpoint/exists", train("--checkpoint", "$D/ck"), prep=ck, names=["--checkpoint"])
    case("checkpoint/is-file", train("--checkpoint", "$D/f"), prep=write("f", b"keep"),
         names=["--checkpoint"])
    case("checkpoint/is-fifo", train("--checkpoint", "$D/f"), prep=fifo("f"),
         names=["--checkpoint"], timeout=20)
    case("checkpoint/is-data-dir", train("--checkpoint", "$D/data", "--data", "$D/data"),
         prep=cp("data"), expect="any", names=["--checkpoint"], may_change=["data/checkpoint"])
    case("checkpoint/every-0", train("--checkpoint", "$D/c", "--checkpoint-every", "0"),
         names=["--checkpoint-every"])
    case("checkpoint/every-1", train("--checkpoint", "$D/c", "--checkpoint-every", "1"),
         expect="ok", check=files_exist("c/checkpoint"))
    case("checkpoint/every-huge", train("--checkpoint", "$D/c", "--checkpoint-every",
                                        "99999999999"), expect="ok",
         check=files_exist("c/checkpoint"))
    case("checkpoint/dev-full-parent", train("--checkpoint", "/dev/full"),
         names=["--checkpoint"])
    case("checkpoint/empty", train("--checkpoint", ""), names=["--checkpoint"])
    case("checkpoint/ro-dir", train("--checkpoint", "$D/ro/c"), prep=mkdir("ro", 0o555),
         user="nobody", names=["--checkpoint"])
    case("checkpoint/ro-existing-dir", train("--checkpoint", "$D/ro"), prep=mkdir("ro", 0o555),
         user="nobody", names=["--checkpoint"])
    # a refused train leaves no lock, no temporary, no half checkpoint
    case("checkpoint/refused-late-no-lock", train("--checkpoint", "$D/c", "--limit-test", "31"),
         names=["--limit-test"], known="checkpoint.lock left after a failed train")
    case("checkpoint/nan-run", train("--checkpoint", "$D/c", "--lr", "3e38", "--optimizer",
                                     "sgd"), expect="nan", allow_new=["c/checkpoint"])
    case("checkpoint/bad-data-no-lock", train("--checkpoint", "$D/c", "--data", "$D/data"),
         prep=lambda D: write_data(os.path.join(D, "data"),
                                   **{"t10k-labels": idx_labels(30, labels=[77] * 30)}),
         names=["label", "t10k", "--data"], known="checkpoint.lock left after a failed train")


def add_data_cases():
    def d(name, expect="refuse", names=("--data", "$D/data"), **over):
        case(f"data/{name}", train("--data", "$D/data"), expect=expect, names=list(names),
             prep=lambda D, over=over: write_data(os.path.join(D, "data"), **over))

    d("good", "ok", names=())
    d("labels-fewer", **{"train-labels": idx_labels(50)})
    d("labels-more", **{"train-labels": idx_labels(70)})
    d("label-10", **{"train-labels": idx_labels(60, labels=[10] * 60)})
    d("label-255", **{"train-labels": idx_labels(60, labels=[255] * 60)})
    d("test-label-200", **{"t10k-labels": idx_labels(30, labels=[200] * 30)})
    d("images-bad-magic", **{"train-images": idx_images(60, magic=0x804)})
    d("labels-bad-magic", **{"train-labels": idx_labels(60, magic=0x803)})
    d("images-float-magic", **{"train-images": idx_images(60, magic=0x0D03)})
    d("images-header-2g", **{"train-images": idx_images(60, header_count=0x7FFFFFFF)})
    d("images-header-4g", **{"train-images": idx_images(60, header_count=0xFFFFFFFF)})
    d("labels-header-4g", **{"train-labels": idx_labels(60, header_count=0xFFFFFFFF)})
    d("images-truncated", **{"train-images": idx_images(60)[:1000]})
    d("images-header-only", **{"train-images": idx_images(0)[:16]})
    d("images-short-header", **{"train-images": b"\0\0\x08\x03\0\0"})
    d("images-empty", **{"train-images": b""})
    d("images-zero", **{"train-images": idx_images(0), "train-labels": idx_labels(0)})
    d("images-trailing", "any", **{"train-images": idx_images(60) + b"extra"})
    d("images-cut-after-48", **{"train-images": idx_images(60)[:16 + 48 * 784]})
    d("images-huge-dims", **{"train-images": put_be(0x803) + put_be(1) + put_be(65536) +
                             put_be(65536) + b"\0" * 100})
    d("images-rows-0", **{"train-images": idx_images(60, rows=0, cols=28)})
    d("images-14x14", **{"train-images": idx_images(60, 14, 14)})
    d("test-14x14", **{"t10k-images": idx_images(30, 14, 14)})
    d("images-missing", **{"train-images": None})
    d("test-labels-missing", **{"t10k-labels": None})
    for name, content in [("gz-corrupt", b"\x1f\x8b\x08\x00garbage"),
                          ("gz-truncated", lambda: gzip.compress(idx_images(60))[:500]),
                          ("gz-no-trailer", lambda: gzip.compress(idx_images(60))[:-8]),
                          ("gz-good", lambda: gzip.compress(idx_images(60)))]:
        def prep(D, content=content):
            write_data(os.path.join(D, "data"), **{"train-images": None})
            with open(os.path.join(D, "data/train-images-idx3-ubyte.gz"), "wb") as f:
                f.write(content() if callable(content) else content)

        case(f"data/{name}", ["train", "--model", "mlp", "--data", "$D/data", "--limit-test",
                              "10", "--batch", "10", "--epochs", "1", "--limit-train", "20"],
             expect="ok" if name == "gz-good" else "refuse", names=["--data", "$D/data"],
             prep=prep)

    def both_forms(D):
        write_data(os.path.join(D, "data"))
        with open(os.path.join(D, "data/train-images-idx3-ubyte.gz"), "wb") as f:
            f.write(gzip.compress(idx_images(50)))

    case("data/gz-and-plain-differ", ["train", "--model", "mlp", "--data", "$D/data",
                                      "--limit-test", "10", "--batch", "10", "--epochs", "1",
                                      "--limit-train", "20"], expect="any", prep=both_forms,
         names=["--data", "$D/data"])
    case("data/labels-is-dir", ["train", "--model", "mlp", "--data", "$D/data", "--limit-test",
                                "10", "--batch", "10", "--epochs", "1", "--limit-train", "20"],
         prep=chain(lambda D: write_data(os.path.join(D, "data"), **{"train-labels": None}),
                    mkdir("data/train-labels-idx1-ubyte")), names=["--data", "$D/data"])
    case("data/images-fifo", ["train", "--model", "mlp", "--data", "$D/data", "--limit-test",
                              "10", "--batch", "10", "--epochs", "1", "--limit-train", "20"],
         prep=chain(lambda D: write_data(os.path.join(D, "data"), **{"t10k-images": None}),
                    fifo("data/t10k-images-idx3-ubyte")), names=["--data", "$D/data"],
         timeout=20)
    case("data/images-dev-zero", ["train", "--model", "mlp", "--data", "$D/data", "--limit-test",
                                  "10", "--batch", "10", "--epochs", "1", "--limit-train", "20"],
         prep=chain(lambda D: write_data(os.path.join(D, "data"), **{"train-images": None}),
                    symlink("/dev/zero", "data/train-images-idx3-ubyte")),
         names=["--data", "$D/data"], timeout=30)


def add_output_cases():
    """Every output flag on a directory, a FIFO, a full disk, a missing directory, an
    unwritable directory, /proc, an input of the same run (also through a symlink and a hard
    link), an existing file it may replace, and an empty name."""
    # (label, the command with OUT for the output, the extension the output must have, prep
    # of its inputs, one input in D)
    targets = [
        ("import-o", ["import", "$D/mlp.onnx", "--batch", "2", "-o", "OUT"], ".tir",
         cp("mlp.onnx"), "mlp.onnx"),
        ("export-o", ["export", "--checkpoint", "$D/ck", "-o", "OUT"], ".onnx", cp("ck"),
         "ck/checkpoint"),
        ("train-metrics", train("--data", "$D/data", "--metrics", "OUT"), "", cp("data"),
         "data/train-images-idx3-ubyte"),
        ("train-trace", train("--data", "$D/data", "--trace", "OUT"), "", cp("data"),
         "data/train-labels-idx1-ubyte"),
        ("train-plot", train("--data", "$D/data", "--plot", "OUT"), ".svg", cp("data"),
         "data/t10k-images-idx3-ubyte"),
        ("dump-o", ["dump", "--model", "mlp", "--batch", "8", "-o", "OUT"], "", None, None),
        ("opt-o", ["opt", "$D/dump.tir", "--passes", "dce", "-o", "OUT"], "", cp("dump.tir"),
         "dump.tir"),
        ("plot-o", ["plot", "$D/m.csv", "-o", "OUT"], ".svg", cp("m.csv"), "m.csv"),
    ]
    for label, args, ext, prep, an_input in targets:
        def mk(out, pre=None, expect="refuse", suffix="", user=None, timeout=None, known=None,
               label=label, args=args, prep=prep, may_change=(), check=None, ext=ext):
            o = out + ext if out.startswith("$D/") else out
            a = [x.replace("OUT", o) for x in args]
            flag = next((x for x in args if x in ("-o", "--metrics", "--trace", "--plot")), "-o")
            case(f"output/{label}-{suffix}", a, expect=expect, prep=chain(prep, pre),
                 names=[n for n in [flag, "--output", o.replace("$D/", "")] if n], user=user,
                 timeout=timeout, known=known, may_change=may_change, check=check)

        mk("$D/dir", mkdir("dir" + ext), suffix="directory")
        mk("$D/fifo", fifo("fifo" + ext), suffix="fifo", timeout=20,
           known="outputs on a FIFO hang")
        if not ext:
            mk("/dev/full", suffix="dev-full")
            mk("/proc/version", suffix="proc-version")
            mk("", suffix="empty-name")
        mk("$D/no/such/dir/out", suffix="missing-dir")
        mk("$D/ro/out", mkdir("ro", 0o555), suffix="unwritable", user="nobody")
        if an_input:
            if not ext:
                mk("$D/" + an_input, suffix="same-as-input")
            # a link to an input: refused, or replaced as a whole (the input stays as it was)
            mk("$D/link", symlink("$D/" + an_input, "link" + ext), suffix="symlink-to-input",
               expect="any", may_change=["link*"])
            mk("$D/hard", hardlink(an_input, "hard" + ext), suffix="hardlink-to-input",
               expect="any", may_change=["hard*"])
        mk("$D/existing", write("existing" + ext, b"old contents\n"), expect="ok",
           suffix="existing-file", may_change=["existing*"])
        mk("$D/dangling", symlink("$D/nowhere/x", "dangling" + ext), suffix="dangling-symlink",
           expect="any", may_change=["dangling*"])


def add_import_cases():
    I = lambda m, *more: ["import", m, "-o", "$D/m.tir"] + merged(["--batch", "2"], more)  # noqa
    case("import/mlp", I("$D/mlp.onnx"), expect="ok", prep=cp("mlp.onnx"),
         check=files_exist("m.tir", "m.weights.onnx"))
    case("import/mlp-batch-4", I("$D/mlp.onnx", "--batch", "4"), expect="ok", prep=cp("mlp.onnx"))
    case("import/open-batch-no-batch", ["import", "$D/mlp.onnx", "-o", "$D/m.tir"],
         prep=cp("mlp.onnx"), names=["--batch", "x"])
    case("import/fixed-batch-with-batch", I("$D/mlp_b10.onnx", "--batch", "4"),
         prep=cp("mlp_b10.onnx"), names=["--batch"],
         known="import --batch on a fixed-batch model silently ignored")
    case("import/fixed-batch-same-batch", I("$D/mlp_b10.onnx", "--batch", "10"), expect="any",
         prep=cp("mlp_b10.onnx"), names=["--batch"])
    case("import/batch-0", I("$D/mlp.onnx", "--batch", "0"), prep=cp("mlp.onnx"),
         names=["--batch"])
    case("import/no-o", ["import", "$D/mlp.onnx"], prep=cp("mlp.onnx"), names=["-o", "--output"])
    case("import/weights-self", I("$D/m.weights.onnx"),
         prep=chain(cp("mlp.onnx"), lambda D: shutil.copy(os.path.join(D, "mlp.onnx"),
                                                          os.path.join(D, "m.weights.onnx"))),
         names=["-o", "--output", "m.weights.onnx"],
         known="import M.weights.onnx -o M.tir overwrites its input")
    case("import/weights-self-no-suffix", I("$D/m.weights.onnx")[:3] + ["$D/m"],
         prep=chain(cp("mlp.onnx"), lambda D: shutil.copy(os.path.join(D, "mlp.onnx"),
                                                          os.path.join(D, "m.weights.onnx"))),
         names=["-o", "--output", "m.weights.onnx"],
         known="import M.weights.onnx -o M.tir overwrites its input")
    case("import/weights-path-is-dir", I("$D/mlp.onnx"),
         prep=chain(cp("mlp.onnx"), mkdir("m.weights.onnx")), names=["m.weights.onnx"],
         known="half-written .tir after a failed import")
    case("import/weights-path-is-fifo", I("$D/mlp.onnx"),
         prep=chain(cp("mlp.onnx"), fifo("m.weights.onnx")), names=["m.weights.onnx"],
         timeout=20, known="outputs on a FIFO hang")
    case("import/weights-path-dev-full", I("$D/mlp.onnx"),
         prep=chain(cp("mlp.onnx"), symlink("/dev/full", "m.weights.onnx")), expect="refuse",
         names=["m.weights.onnx"])
    case("import/existing-outputs", I("$D/mlp.onnx"),
         prep=chain(cp("mlp.onnx"), write("m.tir", b"old"), write("m.weights.onnx", b"old")),
         expect="ok", may_change=["m.tir", "m.weights.onnx"])
    case("import/o-no-tir-suffix", ["import", "$D/mlp.onnx", "--batch", "2", "-o", "$D/m.txt"],
         prep=cp("mlp.onnx"), names=["-o"])
    case("import/o-is-model-dir", ["import", "$D/mlp.onnx", "-o", "$D/"], prep=cp("mlp.onnx"),
         names=["-o", "--output", "$D"])
    # the model file itself
    for name, data in [("empty", b""), ("text", b"hello\n"), ("zeros", b"\0" * 1000),
                       ("random", bytes(RNG.integers(0, 256, 5000, dtype=np.uint8)))]:
        case(f"import/model-{name}", I("$D/bad.onnx"), prep=write("bad.onnx", data),
             names=["bad.onnx"])
    for frac in [0.1, 0.5, 0.9, 0.999]:
        case(f"import/model-truncated-{frac}", I("$D/bad.onnx"),
             prep=write("bad.onnx", lambda frac=frac: open(os.path.join(FIX, "mlp.onnx"), "rb")
                        .read()[:int(os.path.getsize(os.path.join(FIX, "mlp.onnx")) * frac)]),
             names=["bad.onnx"])
    case("import/model-missing", I("$D/none.onnx"), names=["none.onnx"])
    case("import/model-dir", I("$D/dir"), prep=mkdir("dir"), names=["dir"])
    case("import/model-fifo", I("$D/f.onnx"), prep=fifo("f.onnx"), names=["f.onnx"], timeout=20)
    case("import/model-dev-zero", I("/dev/zero"), names=["/dev/zero"], timeout=30)
    case("import/model-tir", I("$D/mlp.tir"), prep=cp("mlp.tir"), names=["mlp.tir"])


def onnx_variants():
    """(name, maker, expect, names, known): models to import, run and (if they have logits)
    train. expect is what import should do."""
    V = []

    def v(name, make, expect="refuse", names=(), known=None, trains=False, nan=False):
        V.append((name, make, expect, list(names), known, trains, nan))

    def mlp_with(**kw):
        return lambda: mlp_model(**kw)

    w1 = RNG.normal(0, 0.05, (32, 784)).astype(np.float32)

    def w_with(val, at=(0, 0)):
        w = w1.copy()
        w[at] = val
        return w

    v("mlp", mlp_with(), "ok", trains=True)
    v("cnn", cnn_model, "ok", trains=True)
    v("w-inf", mlp_with(w1=w_with(np.inf)), "ok", names=["w1"], trains=True, nan=True,
      known="inf constants make a .tir that run cannot parse")
    v("w-neg-inf", mlp_with(w1=w_with(-np.inf)), "ok", names=["w1"], trains=True, nan=True,
      known="inf constants make a .tir that run cannot parse")
    v("w-nan", mlp_with(w1=w_with(np.nan)), "ok", names=["w1"], trains=True, nan=True)
    v("w-all-nan", mlp_with(w1=np.full((32, 784), np.nan, np.float32)), "ok", trains=True,
      nan=True)
    v("w-subnormal", mlp_with(w1=w_with(1e-40)), "ok", trains=True)
    v("w-neg-zero", mlp_with(w1=w_with(-0.0)), "ok", trains=True)
    v("w-max", mlp_with(w1=w_with(3.4e38)), "ok", trains=True, nan=True)
    v("w-hidden-0", mlp_with(hidden=0, w1=np.zeros((0, 784), np.float32),
                             w2=np.zeros((10, 0), np.float32)), "any", names=["w1", "fc1", "w2"])
    v("classes-5", mlp_with(classes=5), "ok", names=["logits", "5"])
    v("classes-1", mlp_with(classes=1), "ok", names=["logits", "1"])
    v("softmax-out", mlp_with(softmax=True), "ok", trains=True)
    for f in ["inf", "-inf", "nan", "1e-45", "3.4e38", "0"]:
        v(f"mul-const-{f}", lambda f=f: scaled_model(float(f)), "ok", trains=True,
          nan=f in ("inf", "-inf", "nan"),
          known="inf constants make a .tir that run cannot parse" if "inf" in f else None)
    v("opset-5", mlp_with(opset=5), "refuse", names=["opset", "5"])
    v("opset-6", mlp_with(opset=6), "any", names=["opset"])
    v("opset-17", mlp_with(opset=17), "ok")
    v("opset-18", mlp_with(opset=18), "any", names=["opset", "18"])
    v("opset-99", mlp_with(opset=99), "refuse", names=["opset", "99"])
    v("name-space", mlp_with(in_name="x y", out_name="lo gits"), "ok", trains=True)
    v("name-percent", mlp_with(in_name="%x", out_name="@logits"), "ok", trains=True)
    v("name-quote", mlp_with(in_name='x"', out_name="l'o\"g"), "ok")
    v("name-newline", mlp_with(in_name="x\ny", out_name="lo\ngits"), "any", names=["x", "lo"])
    v("name-unicode", mlp_with(in_name="图像", out_name="ロジット"), "ok")
    v("name-slash", mlp_with(out_name="../../etc/out"), "ok")
    v("name-empty-out", mlp_with(out_name=""), "refuse", names=["output", "fc2", "''"])
    v("name-long", mlp_with(out_name="o" * 10000), "any", names=["o" * 20])
    v("name-braces", mlp_with(in_name="x}{", out_name="loc(\"a\")"), "ok")
    v("relu-name-odd", mlp_with(relu_name="relu) {var=@w1} : f32[1]"), "ok")

    def names_collide(m):  # two node names the .tir spells alike
        m.graph.node[1].name = "fc 1"
        m.graph.node[2].name = "fc_1"

    v("node-names-collide", lambda: (lambda m: (names_collide(m), m)[1])(mlp_with()()), "ok",
      trains=True)

    def values_collide(m):  # a node output and a graph input the .tir spells alike
        m.graph.node[0].name = "x_y"
        m.graph.input[0].name = "x y"
        m.graph.node[0].input[0] = "x y"

    v("value-names-collide", lambda: (lambda m: (values_collide(m), m)[1])(mlp_with()()), "ok",
      trains=True)
    v("two-outputs", mlp_with(extra_out=True), "ok")

    def mutate(base, fn):
        def make():
            m = base()
            fn(m)
            return m

        return make

    mlp = mlp_with()

    def set_init(name, arr):
        def fn(m):
            for i, t in enumerate(m.graph.initializer):
                if t.name == name:
                    m.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, name))
        return fn

    v("w1-double", mutate(mlp, set_init("w1", w1.astype(np.float64))), "refuse",
      names=["w1", "fc1", "double"])
    v("w1-float16", mutate(mlp, set_init("w1", w1.astype(np.float16))), "refuse",
      names=["w1", "fc1", "float16"])
    v("w1-int32", mutate(mlp, set_init("w1", (w1 * 100).astype(np.int32))), "refuse",
      names=["w1", "fc1"])
    v("w1-wrong-shape", mutate(mlp, set_init("w1", w1[:, :700])), "refuse",
      names=["w1", "fc1", "700"])
    v("w1-rank-3", mutate(mlp, set_init("w1", w1.reshape(32, 28, 28))), "refuse",
      names=["w1", "fc1"])

    def no_data(m):
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.ClearField("float_data")

    v("w1-no-data", mutate(mlp, no_data), "refuse", names=["w1"])

    def short_data(m):
        t = m.graph.initializer[0]
        t.raw_data = t.raw_data[:100]

    v("w1-short-data", mutate(mlp, short_data), "refuse", names=["w1"])

    def neg_dim(m):
        m.graph.initializer[0].dims[0] = -32

    v("w1-negative-dim", mutate(mlp, neg_dim), "refuse", names=["w1"])

    def huge_dims(m):
        t = m.graph.initializer[0]
        del t.dims[:]
        t.dims.extend([2 ** 31, 2 ** 31])

    v("w1-huge-dims", mutate(mlp, huge_dims), "refuse", names=["w1"])

    def external(m):
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "../../../../etc/passwd"

    v("w1-external-data", mutate(mlp, external), "refuse", names=["w1", "external"])

    def x_dtype(elem):
        def fn(m):
            m.graph.input[0].type.tensor_type.elem_type = elem
        return fn

    v("x-int32", mutate(mlp, x_dtype(TensorProto.INT32)), "refuse", names=["x", "int32"])
    v("x-double", mutate(mlp, x_dtype(TensorProto.DOUBLE)), "refuse", names=["x", "double"])
    v("x-string", mutate(mlp, x_dtype(TensorProto.STRING)), "refuse", names=["x", "string"])

    def x_shape(dims):
        def fn(m):
            m.graph.input[0].CopyFrom(vi("x", shape=dims))
        return fn

    v("x-rank-2", mutate(mlp, x_shape(["N", 784])), "ok")
    V[-1] = V[-1][:2] + ("any",) + V[-1][3:]  # x.pb is [2,1,28,28]: refused by run
    v("x-no-shape", mutate(mlp, x_shape(None)), "refuse", names=["x"])
    v("x-batch-0", mutate(mlp, x_shape([0, 1, 28, 28])), "refuse", names=["x", "0"])
    v("x-dim-neg", mutate(mlp, x_shape([-1, 1, 28, 28])), "any", names=["x"])
    v("x-wrong-size", mutate(mlp, x_shape(["N", 1, 28, 27])), "refuse", names=["x", "fc1", "w1"])

    def ghost_input(m):
        m.graph.node[1].input[0] = "ghost"

    v("node-missing-input", mutate(mlp, ghost_input), "refuse", names=["ghost", "fc1"])

    def no_outputs(m):
        del m.graph.output[:]

    v("graph-no-outputs", mutate(mlp, no_outputs), "refuse", names=["output"])

    def no_inputs(m):
        del m.graph.input[:]

    v("graph-no-inputs", mutate(mlp, no_inputs), "refuse", names=["x", "input"])

    def output_unproduced(m):
        m.graph.output[0].name = "nobody_makes_this"

    v("output-unproduced", mutate(mlp, output_unproduced), "refuse", names=["nobody_makes_this"])

    def dup_output(m):
        m.graph.node[2].output[0] = "h"

    v("node-dup-output", mutate(mlp, dup_output), "refuse", names=["h", "relu"])

    def cycle(m):
        m.graph.node[1].input[0] = "hr"

    v("graph-cycle", mutate(mlp, cycle), "refuse", names=["hr", "fc1", "relu"])

    def unknown_op(m):
        m.graph.node[2].op_type = "Frobnicate"

    v("op-unknown", mutate(mlp, unknown_op), "refuse", names=["Frobnicate", "relu"])

    def other_domain(m):
        m.graph.node[2].domain = "com.microsoft"

    v("op-other-domain", mutate(mlp, other_domain), "refuse", names=["com.microsoft", "relu"])

    def no_opset(m):
        del m.opset_import[:]

    v("no-opset", mutate(mlp, no_opset), "refuse", names=["opset"])

    def ir_version(n):
        def fn(m):
            m.ir_version = n
        return fn

    v("ir-version-0", mutate(mlp, ir_version(0)), "refuse", names=["ir_version", "IR version"])
    v("ir-version-99", mutate(mlp, ir_version(99)), "any", names=["ir_version", "IR version"])

    def gemm_attr(**attrs):
        def fn(m):
            for k, val in attrs.items():
                m.graph.node[1].attribute.append(helper.make_attribute(k, val))
        return fn

    v("gemm-alpha-inf", mutate(mlp, gemm_attr(alpha=float("inf"))), "any", names=["fc1", "alpha"])
    v("gemm-alpha-nan", mutate(mlp, gemm_attr(alpha=float("nan"))), "any", names=["fc1", "alpha"])
    v("gemm-alpha-2", mutate(mlp, gemm_attr(alpha=2.0)), "ok")
    v("gemm-beta-0", mutate(mlp, gemm_attr(beta=0.0)), "ok")
    v("gemm-transA", mutate(mlp, gemm_attr(transA=1)), "refuse", names=["fc1"])

    def flatten_axis(a):
        def fn(m):
            m.graph.node[0].attribute[0].i = a
        return fn

    v("flatten-axis-9", mutate(mlp, flatten_axis(9)), "refuse", names=["flatten", "axis"])
    v("flatten-axis-neg-9", mutate(mlp, flatten_axis(-9)), "refuse", names=["flatten", "axis"])
    v("flatten-axis-0", mutate(mlp, flatten_axis(0)), "refuse", names=["flatten", "fc1"])

    def softmax_axis(a):
        def fn(m):
            m.graph.node[-1].attribute[0].i = a
        return fn

    sm = mlp_with(softmax=True)
    v("softmax-axis-5", mutate(sm, softmax_axis(5)), "refuse", names=["softmax", "axis"])
    v("softmax-axis-neg-1", mutate(sm, softmax_axis(-1)), "ok")
    return V


def conv_pool_variants():
    """(op, name, attrs, expect): single Conv / MaxPool / AveragePool nodes on 28x28."""
    out = []
    for op in ["Conv", "MaxPool", "AveragePool"]:
        k = {"kernel_shape": [3, 3]}
        A = lambda **a: {**k, **a}  # noqa: E731
        R = "refuse"
        rows = [
            ("plain", A(), "ok"),
            ("strides-0", A(strides=[0, 0]), R),
            ("strides-0-1", A(strides=[0, 1]), R),
            ("strides-neg", A(strides=[-1, -1]), R),
            ("strides-100", A(strides=[100, 100]), "ok"),
            ("strides-1-elem", A(strides=[2]), R),
            ("strides-2-2", A(strides=[2, 2]), "ok"),
            ("strides-2-1", A(strides=[2, 1]), R),
            ("dilations-0", A(dilations=[0, 0]), R),
            ("dilations-neg", A(dilations=[-1, -1]), R),
            ("dilations-2", A(dilations=[2, 2]), R if op != "AveragePool" else "any"),
            ("pads-neg", A(pads=[-1, -1, -1, -1]), R),
            ("pads-huge", A(pads=[1000, 1000, 1000, 1000]), "any"),
            ("pads-3", A(pads=[3, 3, 3, 3]), "any"),
            ("pads-2-elem", A(pads=[1, 1]), R),
            ("pads-asym", A(pads=[0, 0, 1, 1]), R),
            ("kernel-30", {"kernel_shape": [30, 30]}, R),
            ("kernel-28", {"kernel_shape": [28, 28]}, "ok"),
            ("kernel-0", {"kernel_shape": [0, 0]}, R),
            ("kernel-neg", {"kernel_shape": [-3, -3]}, R),
            ("kernel-1-elem", {"kernel_shape": [3]}, R),
            ("kernel-3d", {"kernel_shape": [3, 3, 3]}, R),
            ("auto-pad-same", A(auto_pad="SAME_UPPER"), "any"),
            ("auto-pad-bogus", A(auto_pad="FOO"), R),
            ("kernel-30-pads-1", A(kernel_shape=[30, 30], pads=[1, 1, 1, 1]),
             "ok" if op != "AveragePool" else "any"),
            ("kernel-huge", {"kernel_shape": [2 ** 31, 2 ** 31]}, R),
            ("strides-huge", A(strides=[2 ** 31, 2 ** 31]), "any"),
        ]
        if op == "Conv":
            rows += [("group-0", A(group=0), R), ("group-neg", A(group=-1), R),
                     ("group-2", A(group=2), R), ("no-kernel-shape", {}, "ok")]
        else:
            rows += [("ceil-mode", A(ceil_mode=1, strides=[2, 2]), "any"),
                     ("no-kernel-shape", {}, R)]
            if op == "AveragePool":
                rows += [("count-include-pad", A(count_include_pad=1, pads=[1, 1, 1, 1]), "ok"),
                         ("exclude-pad", A(count_include_pad=0, pads=[1, 1, 1, 1]), "any")]
            else:
                rows += [("storage-order", A(storage_order=1), "any")]
        for name, attrs, e in rows:
            out.append((op, name, attrs, e,
                        "zero strides in Conv/MaxPool/AveragePool (SIGFPE)"
                        if "strides-0" in name else None))
    # Conv weights that do not match
    out.append(("Conv", "w-in-channels-2", {"kernel_shape": [3, 3]}, "refuse", None))
    out.append(("Conv", "w-kernel-mismatch", {"kernel_shape": [5, 5]}, "refuse", None))
    out.append(("Conv", "w-empty", {"kernel_shape": [3, 3]}, "any", None))
    out.append(("Conv", "w-nan", {"kernel_shape": [3, 3]}, "ok", None))
    out.append(("Conv", "w-inf", {"kernel_shape": [3, 3]}, "ok",
                "inf constants make a .tir that run cannot parse"))
    return out


def torch_single(op, attrs, x, w=None, b=None):
    """PyTorch's answer for a single Conv / pool node, or an exception."""
    ks = attrs.get("kernel_shape", list(w.shape[2:]) if w is not None else None)
    if ks is None or len(ks) != 2:
        raise ValueError("no 2-D kernel")
    s = attrs.get("strides", [1, 1])
    d = attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    if "auto_pad" in attrs or attrs.get("ceil_mode") or attrs.get("storage_order"):
        raise ValueError("not compared")
    if len(p) != 4 or p[0] != p[2] or p[1] != p[3] or min(p) < 0 or len(s) != 2 or min(s) <= 0:
        raise ValueError("no torch equivalent")
    if len(d) != 2 or min(d) <= 0:
        raise ValueError("no torch equivalent")
    xt = torch.from_numpy(x.copy())
    if op == "Conv":
        if list(w.shape[2:]) != list(ks):
            raise ValueError("kernel mismatch")
        return TF.conv2d(xt, torch.from_numpy(w.copy()), torch.from_numpy(b.copy()), stride=s, padding=p[:2],
                         dilation=d, groups=attrs.get("group", 1)).numpy()
    if op == "MaxPool":
        return TF.max_pool2d(xt, ks, stride=s, padding=p[:2], dilation=d).numpy()
    if d != [1, 1]:
        raise ValueError("no torch equivalent")
    return TF.avg_pool2d(xt, ks, stride=s, padding=p[:2],
                         count_include_pad=bool(attrs.get("count_include_pad", 0))).numpy()


def add_onnx_model_cases():
    X2 = images(2)

    for name, make, expect, names, known, trains, nan in onnx_variants():
        path = f"v_{name}.onnx"
        prep = onnx_file(path, make)
        nm = names + [path, "$D"]
        case(f"onnx-import/{name}", ["import", f"$D/{path}", "-o", "$D/m.tir", "--batch", "2"],
             expect=expect, prep=prep, names=nm, known=known)
        m = make()
        in_name = m.graph.input[0].name if len(m.graph.input) else "x"
        run_expect = expect
        check = None
        if name in ("w-nan", "w-all-nan"):
            check = output_has_nan(None)
        case(f"onnx-run/{name}", ["run", f"$D/{path}", "--input", f"{in_name}=$D/x.pb",
                                  "--output-dir", "$D/out"], expect=run_expect,
             prep=chain(prep, lambda D: save_tensor(X2, os.path.join(D, "x.pb"))), names=nm,
             known=known, check=check)
        if expect in ("ok", "any") or name.startswith("classes"):
            # the imported module runs as the model does (its input named as the .tir spells
            # it: the model's own name where that is an IR name)
            odd = not re.fullmatch(r"[A-Za-z_][\w.]*", in_name)
            case(f"onnx-import-run/{name}", ["run", "$D/m.tir", "--input", f"{in_name}=$D/x.pb",
                                             "--output-dir", "$D/out"],
                 expect="any" if odd else expect, prep=chain(prep, lambda D, path=path: subprocess.run(
                     [TANDEM, "import", os.path.join(D, path), "-o", os.path.join(D, "m.tir"),
                      "--batch", "2"], capture_output=True),
                     lambda D: save_tensor(X2, os.path.join(D, "x.pb"))),
                 names=nm + ["m.tir"], known=known, may_change=[], allow_new=["out/*"],
                 check=output_has_nan(None) if name in ("w-nan", "w-all-nan") else None)
        if trains or name.startswith("classes") or name in ("x-rank-2", "two-outputs"):
            te = "nan" if nan else ("refuse" if name.startswith("classes") or
                                    name in ("two-outputs",) else "ok")
            if name in ("x-rank-2", "w-max", "mul-const-3.4e38"):
                te = "any"
            case(f"onnx-train/{name}", train_onnx(f"$D/{path}"), expect=te, prep=prep,
                 names=nm + ["--onnx", "--logits", "--input"], check=epoch_rows_finite,
                 known=known)

    # Conv / pool attributes: import, and run against PyTorch
    xs = images(2, seed=11)
    for op, name, attrs, expect, known in conv_pool_variants():
        w = None
        if op == "Conv":
            shape = (4, 1, *attrs.get("kernel_shape", [3, 3])) if len(
                attrs.get("kernel_shape", [3, 3])) == 2 else (4, 1, 3, 3)
            if name == "w-in-channels-2":
                shape = (4, 2, 3, 3)
            if name == "w-kernel-mismatch":
                shape = (4, 1, 3, 3)
            if name == "w-empty":
                shape = (0, 1, 3, 3)
            if min(shape) < 0 or max(shape) > 64:
                shape = (4, 1, 3, 3)
            w = np.random.default_rng(5).normal(0, 0.3, shape).astype(np.float32)
            if name == "w-nan":
                w[0, 0, 1, 1] = np.nan
            if name == "w-inf":
                w[0, 0, 1, 1] = np.inf
        b = None
        if op == "Conv":
            b = np.random.default_rng(6).normal(0, 0.1, (w.shape[0],)).astype(np.float32)
        mk = (lambda op=op, attrs=attrs, w=w, b=b: single_op_model(op, attrs, w=w, b=b))
        path = f"{op}_{name}.onnx"
        prep = onnx_file(path, mk)
        nm = ["op", op, path]
        case(f"onnx-{op}/{name}/import", ["import", f"$D/{path}", "-o", "$D/m.tir", "--batch",
                                          "2"], expect=expect, prep=prep, names=nm, known=known)
        ch = oracle(lambda op=op, attrs=attrs, w=w, b=b: torch_single(op, attrs, xs, w, b))
        if name == "w-nan":
            ch = output_has_nan(None)
        case(f"onnx-{op}/{name}/run", ["run", f"$D/{path}", "--input", "x=$D/x.pb",
                                       "--output-dir", "$D/out"], expect=expect,
             prep=chain(prep, lambda D: save_tensor(xs, os.path.join(D, "x.pb"))), names=nm,
             known=known, check=ch)


def add_run_cases():
    X2 = images(2)
    base = cp("mlp.onnx", "x2.pb")

    def r(name, args, expect="refuse", prep=None, names=None, **kw):
        case(f"run/{name}", args, expect=expect, prep=chain(base, prep), names=names, **kw)

    R = lambda *more, m="$D/mlp.onnx": ["run", m] + list(more)  # noqa: E731
    r("good", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"), "ok",
      check=oracle(lambda: mlp_torch(X2)))
    r("output-dir-existing-others", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"), "ok",
      prep=write("out/keep.txt", b"keep"))
    r("output-dir-is-file", R("--input", "x=$D/x2.pb", "--output-dir", "$D/f"),
      prep=write("f", b"keep"), names=["--output-dir"])
    r("output-dir-is-fifo", R("--input", "x=$D/x2.pb", "--output-dir", "$D/f"), prep=fifo("f"),
      names=["--output-dir"], timeout=20)
    r("output-dir-deep-missing", R("--input", "x=$D/x2.pb", "--output-dir", "$D/a/b/c"), "any",
      names=["--output-dir"])
    r("output-dir-ro", R("--input", "x=$D/x2.pb", "--output-dir", "$D/ro"),
      prep=mkdir("ro", 0o555), user="nobody", names=["--output-dir", "ro"])
    r("output-dir-proc", R("--input", "x=$D/x2.pb", "--output-dir", "/proc"),
      names=["--output-dir", "/proc"])
    r("output-0-is-dir", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"),
      prep=mkdir("out/output_0.pb"), names=["output_0.pb"])
    r("output-0-is-fifo", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"),
      prep=fifo("out/output_0.pb"), names=["output_0.pb"], timeout=20,
      known="outputs on a FIFO hang")
    r("output-0-symlink-to-model", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"),
      prep=chain(mkdir("out"), symlink("$D/mlp.onnx", "out/output_0.pb")), expect="any",
      names=["output_0.pb", "mlp.onnx"], may_change=["out/output_0.pb"])
    r("output-0-dev-full", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out"),
      prep=chain(mkdir("out"), symlink("/dev/full", "out/output_0.pb")),
      names=["output_0.pb"])
    r("input-is-output", R("--input", "x=$D/out/output_0.pb", "--output-dir", "$D/out"),
      prep=lambda D: (os.makedirs(os.path.join(D, "out")),
                      save_tensor(X2, os.path.join(D, "out/output_0.pb"))),
      names=["output_0.pb", "--input", "--output-dir"],
      known="run --input x=DIR/output_0.pb --output-dir DIR overwrites its input")
    r("input-is-output-via-symlink", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"),
      prep=lambda D: (os.makedirs(os.path.join(D, "out")),
                      save_tensor(X2, os.path.join(D, "out/output_0.pb")),
                      os.symlink(os.path.join(D, "out/output_0.pb"), os.path.join(D, "in.pb"))),
      names=["output_0.pb", "in.pb", "--input", "--output-dir"])
    r("model-in-output-dir", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out",
                               m="$D/out/output_0.pb"),
      prep=lambda D: (os.makedirs(os.path.join(D, "out")),
                      shutil.copy(os.path.join(FIX, "mlp.onnx"),
                                  os.path.join(D, "out/output_0.pb"))),
      names=["output_0.pb", "--output-dir"])
    r("no-input", R("--output-dir", "$D/out"), names=["--input", "x"])
    r("no-output-dir", R("--input", "x=$D/x2.pb"), names=["--output-dir"])
    r("input-unknown-name", R("--input", "y=$D/x2.pb", "--output-dir", "$D/out"),
      names=["y", "--input"])
    r("input-extra", R("--input", "x=$D/x2.pb", "--input", "y=$D/x2.pb", "--output-dir", "$D/out"),
      names=["y", "--input"])
    r("input-twice", R("--input", "x=$D/x2.pb", "--input", "x=$D/x2.pb", "--output-dir",
                       "$D/out"), names=["x", "--input"])
    for spec in ["x=", "=x.pb", "x", "", "x==$D/x2.pb"]:
        r(f"input-spec-{spec.replace('$D/', '')!r}", R("--input", spec, "--output-dir", "$D/out"),
          names=["--input"])
    for name, arr, dt in [("wrong-width", np.zeros((2, 1, 28, 27)), np.float32),
                          ("rank-2", np.zeros((2, 784)), np.float32),
                          ("double", X2, np.float64), ("int64", X2 * 10, np.int64),
                          ("float16", X2, np.float16), ("empty-batch", np.zeros((0, 1, 28, 28)),
                                                        np.float32),
                          ("scalar", np.float32(1), np.float32),
                          ("batch-1", images(1), np.float32), ("batch-7", images(7), np.float32),
                          ("bool", X2 > 0.5, np.bool_)]:
        e = "ok" if name.startswith("batch-") else ("any" if name == "empty-batch" else "refuse")
        r(f"input-{name}", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"), e,
          prep=lambda D, arr=arr, dt=dt: save_tensor(arr, os.path.join(D, "in.pb"), dtype=dt),
          names=["in.pb", "x", "--input"],
          check=oracle(lambda arr=arr: mlp_torch(arr.astype(np.float32)))
          if name.startswith("batch-") else None)
    r("input-nan", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"), "ok",
      prep=lambda D: save_tensor(np.where(X2 > 0.5, np.nan, X2), os.path.join(D, "in.pb")),
      check=output_has_nan(None), known="ReLU/softmax swallow NaN")
    case("run/softmax-input-nan", ["run", "$D/s.onnx", "--input", "x=$D/in.pb", "--output-dir",
                                   "$D/out"], expect="ok",
         prep=chain(onnx_file("s.onnx", lambda: mlp_model(softmax=True)),
                    lambda D: save_tensor(np.where(X2 > 0.5, np.nan, X2),
                                          os.path.join(D, "in.pb"))),
         check=output_has_nan(None), known="ReLU/softmax swallow NaN")
    r("input-inf", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"), "ok",
      prep=lambda D: save_tensor(np.full_like(X2, np.inf), os.path.join(D, "in.pb")))
    r("input-truncated", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"),
      prep=lambda D: open(os.path.join(D, "in.pb"), "wb").write(
          open(os.path.join(FIX, "x2.pb"), "rb").read()[:100]), names=["in.pb", "--input"])
    r("input-empty-file", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"),
      prep=write("in.pb", b""), names=["in.pb", "--input"])
    r("input-is-model", R("--input", "x=$D/mlp.onnx", "--output-dir", "$D/out"),
      names=["mlp.onnx", "--input"])
    r("input-is-dir", R("--input", "x=$D", "--output-dir", "$D/out"), names=["$D", "--input"])
    r("input-fifo", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"), prep=fifo("in.pb"),
      names=["in.pb", "--input"], timeout=20)
    r("input-dev-zero", R("--input", "x=/dev/zero", "--output-dir", "$D/out"),
      names=["/dev/zero", "--input"], timeout=30)
    r("input-missing", R("--input", "x=$D/none.pb", "--output-dir", "$D/out"),
      names=["none.pb", "--input"])
    r("input-raw-short", R("--input", "x=$D/in.pb", "--output-dir", "$D/out"),
      prep=lambda D: _short_raw(X2, os.path.join(D, "in.pb")), names=["in.pb", "--input"])
    for dev, e in [("cpu:0", "ok"), ("cpu:1", "any"), ("cpu:99999", "any"), ("cuda:0", "refuse"),
                   ("gpu", "refuse"), ("", "refuse"), ("cpu:0,cpu:1", "refuse"),
                   ("cpu:-1", "refuse")]:
        r(f"device-{dev!r}", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out", "--device", dev),
          e, names=["--device"])
    r("weights-with-onnx", R("--input", "x=$D/x2.pb", "--output-dir", "$D/out", "--weights",
                             "$D/x2.pb"), names=["--weights"])
    # .tir modules
    T = lambda *more: ["run", "$D/mlp.tir", "--input", "x=$D/x2.pb", "--output-dir",  # noqa
                       "$D/out"] + list(more)
    tb = cp("mlp.tir", "mlp.weights.onnx")
    r("tir-good", T(), "ok", prep=tb, check=oracle(lambda: mlp_torch(X2)))
    r("tir-weights-missing", T(), prep=cp("mlp.tir"), names=["weights", "mlp.weights.onnx"])
    r("tir-weights-other", T("--weights", "$D/cnn.weights.onnx"),
      prep=chain(tb, cp("cnn.weights.onnx")), names=["--weights", "cnn.weights.onnx"])
    r("tir-weights-model", T("--weights", "$D/mlp.onnx"), "any", prep=tb,
      names=["--weights", "mlp.onnx"])
    r("tir-weights-dir", T("--weights", "$D"), prep=tb, names=["--weights", "$D"])
    r("tir-weights-fifo", T("--weights", "$D/w"), prep=chain(tb, fifo("w")),
      names=["--weights", "w"], timeout=20)
    r("tir-wrong-batch-input", ["run", "$D/mlp.tir", "--input", "x=$D/in.pb", "--output-dir",
                                "$D/out"], prep=chain(tb, lambda D: save_tensor(
                                    images(3), os.path.join(D, "in.pb"))),
      names=["x", "in.pb", "3"])
    r("tir-output-dir-holds-weights", ["run", "$D/out/mlp.tir", "--input", "x=$D/x2.pb",
                                       "--output-dir", "$D/out"],
      prep=lambda D: (os.makedirs(os.path.join(D, "out")),
                      shutil.copy(os.path.join(FIX, "mlp.tir"), os.path.join(D, "out/mlp.tir")),
                      shutil.copy(os.path.join(FIX, "mlp.weights.onnx"),
                                  os.path.join(D, "out/mlp.weights.onnx"))), expect="ok")
    r("tir-weights-named-output-0", T("--weights", "$D/out/output_0.pb"),
      prep=chain(cp("mlp.tir"), lambda D: (os.makedirs(os.path.join(D, "out")), shutil.copy(
          os.path.join(FIX, "mlp.weights.onnx"), os.path.join(D, "out/output_0.pb")))),
      names=["--weights", "output_0.pb", "--output-dir"])

    def weights_with(fn):
        def prep(D):
            m = onnx.load(os.path.join(FIX, "mlp.weights.onnx"))
            fn(m)
            save(m, os.path.join(D, "w.onnx"))
        return chain(cp("mlp.tir"), prep)

    def matrix(m):  # the first weight matrix (not a bias)
        return next(t for t in m.graph.initializer if len(t.dims) > 1)

    def w_nan(m):
        t = matrix(m)
        a = numpy_helper.to_array(t).copy()
        a.flat[0] = np.nan
        t.CopyFrom(numpy_helper.from_array(a, t.name))

    def w_drop(m):
        del m.graph.initializer[0]

    def w_extra(m):
        m.graph.initializer.append(tensor("stray", np.zeros(3)))

    def w_shape(m):
        t = matrix(m)
        a = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(a.reshape(-1), t.name))

    def w_double(m):
        t = matrix(m)
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    def w_dup(m):
        m.graph.initializer.append(m.graph.initializer[0])

    for name, fn, e in [("nan", w_nan, "ok"), ("dropped", w_drop, "refuse"),
                        ("extra", w_extra, "refuse"), ("reshaped", w_shape, "refuse"),
                        ("double", w_double, "refuse"), ("duplicate", w_dup, "any")]:
        r(f"tir-weights-{name}", T("--weights", "$D/w.onnx"), e, prep=weights_with(fn),
          names=["--weights", "w.onnx"],
          check=output_has_nan(None) if name == "nan" else None)


def mlp_torch(x):
    m = onnx.load(os.path.join(FIX, "mlp.onnx"))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    h = np.maximum(x.reshape(x.shape[0], -1) @ w["w1"].T + w["b1"], 0)
    return (h @ w["w2"].T + w["b2"]).astype(np.float32)


def _short_raw(arr, path):
    t = numpy_helper.from_array(arr.astype(np.float32), "x")
    t.raw_data = t.raw_data[:-4]
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def add_tir_cases():
    """Hand edits of the .tir files `tandem import` wrote (batch 2), run on x2.pb: mlp.tir
    (flatten, linear, relu), cnn.tir (conv2d, max_pool2d, avg_pool2d: integer attributes)
    and scaled.tir (the mlp times a constant 0.5: a float attribute)."""

    def edit(name, fn, expect="refuse", names=(), known=None, check=None, base="mlp"):
        def prep(D):
            shutil.copy(os.path.join(FIX, f"{base}.weights.onnx"),
                        os.path.join(D, f"{base}.weights.onnx"))
            shutil.copy(os.path.join(FIX, "x2.pb"), os.path.join(D, "x2.pb"))
            text = open(os.path.join(FIX, f"{base}.tir"), encoding="utf-8").read()
            new = fn(text)
            if new == text and not name.endswith("unchanged"):
                raise RuntimeError(f"tir edit {name} changed nothing")
            with open(os.path.join(D, f"{base}.tir"), "w", encoding="utf-8") as f:
                f.write(new)
        case(f"tir/{base}/{name}", ["run", f"$D/{base}.tir", "--input", "x=$D/x2.pb",
                                    "--output-dir", "$D/out"], expect=expect, prep=prep,
             names=list(names) + [f"{base}.tir"], known=known, check=check)

    def sub(pat, rep, count=1):
        return lambda t: re.sub(pat, rep, t, count=count)

    edit("unchanged", lambda t: t, "ok")
    edit("empty", lambda t: "")
    edit("truncated-half", lambda t: t[:len(t) // 2])
    edit("truncated-minus-2", lambda t: t[:-2])
    edit("no-trailing-newline", lambda t: t.rstrip("\n"), "ok")
    edit("crlf", lambda t: t.replace("\n", "\r\n"), "any")
    edit("tabs", lambda t: t.replace("  ", "\t"), "any")
    edit("nul-byte", lambda t: t[:50] + "\0" + t[50:])
    edit("bom", lambda t: "\ufeff" + t, "any")
    edit("latin1-garbage", lambda t: t[:80] + "\xff\xfe" + t[80:])
    edit("dup-first-var-line", lambda t: re.sub(r"(var @[^\n]*\n)", r"\1\1", t, count=1))
    edit("drop-var-w1", sub(r"var @w1 [^\n]*\n", ""), names=["w1"])
    edit("drop-return", sub(r"\n\s*return %[^\n]*", ""))
    edit("return-nothing", sub(r"return %\S+", "return"), "any")
    edit("shape-784-785", sub(r"784\]", "785]"))
    edit("shape-all-784-785", lambda t: t.replace("784", "785"))
    edit("shape-dim-0", lambda t: t.replace("f32[32,", "f32[0,"), names=["0", "w1"])
    edit("shape-dim-neg", sub(r"f32\[32,", "f32[-32,"))
    edit("shape-dim-huge", lambda t: t.replace("f32[32,784]", "f32[99999999999999,784]"))
    edit("shape-dim-overflow", sub(r"f32\[32,", "f32[99999999999999999999999,"))
    edit("shape-rank-9", lambda t: t.replace("f32[32,784]", "f32[1,1,1,1,1,1,1,32,784]"))
    edit("dtype-bf16", lambda t: t.replace("f32[32,784]", "bf16[32,784]"))
    edit("dtype-i32", lambda t: t.replace("f32[32,784]", "i32[32,784]"))
    edit("dtype-f64", lambda t: t.replace("f32[32,784]", "f64[32,784]"))
    edit("input-batch-3", lambda t: t.replace("f32[2,1,28,28]", "f32[3,1,28,28]"),
         names=["x", "3"])
    edit("var-x-batch-3", sub(r"var @x : f32\[2,", "var @x : f32[3,"), names=["x", "3"])
    edit("op-unknown", sub(r"= relu\(", "= frobnicate("), names=["frobnicate"])
    edit("op-relu-to-sigmoid", sub(r"= relu\(", "= sigmoid("), "ok")
    edit("op-relu-to-assign", sub(r"%relu = relu\(%fc1\)", "%relu = assign(%fc1) {var=@w1}"))
    edit("operand-undefined", sub(r"relu\(%fc1", "relu(%ghost"), names=["ghost"])
    edit("operand-later", sub(r"relu\(%fc1", "relu(%fc2"), names=["fc2"])
    edit("value-redefined", sub(r"%relu = relu", "%fc1 = relu"), names=["fc1"])
    edit("var-undefined", sub(r"\{var=@w1\}", "{var=@ghost}"), names=["ghost"])
    edit("attr-unknown", sub(r"\{var=@w1\}", "{var=@w1, frob=1}"), names=["frob"])
    edit("attr-dup", sub(r"\{var=@w1\}", "{var=@w1, var=@w1}"), names=["var"])
    edit("role-fed-w1", sub(r"(var @w1 : f32\[32,784\] \{role=)param", r"\1fed"), "any",
         names=["w1"])
    edit("device-cpu-9", lambda t: t.replace("module @mlp {", "module @mlp devices=[cpu:9] {"),
         "any", names=["cpu:9"])
    edit("device-cuda", lambda t: t.replace("module @mlp {", "module @mlp devices=[cuda:0] {"),
         names=["cuda"])
    edit("module-twice", lambda t: t + t)
    edit("graph-infer-renamed", sub(r"graph @infer", "graph @inference"), names=["infer"])
    edit("graph-init-dropped", lambda t: re.sub(r"graph @init\(\) \{.*?\n\}\n", "", t,
                                                count=1, flags=re.S), "any", names=["init"])
    edit("loc-unterminated", sub(r'loc\("fc1', 'loc("fc1\\\\'))
    edit("comment-line", lambda t: "// a comment\n" + t, "any")
    edit("long-line", lambda t: t.replace("\n", "\n" + " " * 100000, 1), "any")
    edit("deep-brackets", lambda t: t.replace("f32[32,784]", "f32" + "[" * 100000, 1))
    edit("many-dims", lambda t: t.replace("f32[32,784]", "f32[" + ",".join(["1"] * 10000) +
                                          ",32,784]", 1))
    # integer attributes of conv2d and the pools (the .tir twin of the ONNX attribute cases)
    for op, attr, v, e in [("conv2d", "stride", "0", "refuse"), ("conv2d", "stride", "-1", "refuse"),
                           ("conv2d", "pad", "-1", "refuse"), ("conv2d", "pad", "100", "refuse"),
                           ("conv2d", "stride", "99999999999", "refuse"),
                           ("conv2d", "stride", "2", "refuse"),
                           ("max_pool2d", "stride", "0", "refuse"),
                           ("max_pool2d", "kernel", "0", "refuse"),
                           ("max_pool2d", "kernel", "-2", "refuse"),
                           ("max_pool2d", "kernel", "99", "refuse"),
                           ("max_pool2d", "pad", "5", "refuse"),
                           ("avg_pool2d", "stride", "0", "refuse"),
                           ("avg_pool2d", "kernel", "0", "refuse"),
                           ("avg_pool2d", "pad", "-1", "refuse"),
                           ("avg_pool2d", "stride", "1.5", "refuse"),
                           ("avg_pool2d", "stride", "", "refuse")]:
        edit(f"{op}-{attr}-{v or 'empty'}",
             lambda t, op=op, attr=attr, v=v: re.sub(
                 rf"(= {op}\([^)]*\) \{{[^}}]*\b{attr}=)(-?\d+)", rf"\g<1>{v}", t, count=1),
             e, names=[op, attr], base="cnn",
             known="zero strides (SIGFPE)" if attr == "stride" and v == "0" else None)
    edit("cnn-unchanged", lambda t: t, "ok", base="cnn")
    # the float attribute of scale
    for v, e in [("inf", "any"), ("-inf", "any"), ("nan", "any"), ("1e999", "refuse"),
                 ("0x10", "refuse"), ("", "refuse"), ("1e-50", "any"), ("-0", "ok"),
                 ("3.4028236e38", "any"), ("1e-45", "any"), ("0.5.5", "refuse"),
                 ("1,5", "refuse")]:
        edit(f"scale-factor-{v or 'empty'}",
             lambda t, v=v: t.replace("factor=0.5", f"factor={v}"), e, names=["factor", "scale"],
             base="scaled")
    edit("scaled-unchanged", lambda t: t, "ok", base="scaled")


def add_module_cases():
    """train --module with tandem dump's text, edited."""
    base = ["train", "--module", "$D/d.tir", "--data", "$F/data", "--limit-train", "20",
            "--limit-test", "10", "--batch", "10", "--epochs", "1", "--model", "mlp"]

    def mod(name, fn, expect="refuse", names=("d.tir",), extra=()):
        def prep(D):
            text = open(os.path.join(FIX, "dump10.tir"), encoding="utf-8").read()
            new = fn(text)
            if new == text and name not in ("unchanged", "batch-mismatch"):
                raise RuntimeError(f"module edit {name} changed nothing")
            open(os.path.join(D, "d.tir"), "w", encoding="utf-8").write(new)
        case(f"module/{name}", base[:1] + merged(base[1:], extra), expect=expect, prep=prep,
             names=list(names) + ["--module"], check=epoch_rows_finite)

    mod("unchanged", lambda t: t, "ok")
    mod("batch-mismatch", lambda t: t, extra=["--batch", "5"], names=["--batch"])
    mod("lr-inf", lambda t: re.sub(r"lr=[^,}]+", "lr=inf", t), "any", names=["lr"])
    mod("lr-nan", lambda t: re.sub(r"lr=[^,}]+", "lr=nan", t), "any", names=["lr"])
    mod("lr-huge", lambda t: re.sub(r"lr=[^,}]+", "lr=3e38", t), "any", names=["lr"])
    mod("shape-edit", lambda t: t.replace("784]", "785]", 1))
    mod("drop-train-step", lambda t: re.sub(r"graph @train_step.*?\n}\n", "", t, count=1,
                                            flags=re.S), names=["train_step"])
    mod("truncated", lambda t: t[:len(t) // 3])
    mod("devices-2", lambda t: t.replace("devices=[cpu:0]", "devices=[cpu:0, cpu:1]", 1),
        names=["devices", "--devices"])


def add_export_cases():
    E = lambda *more: ["export", "--checkpoint", "$D/ck", "-o", "$D/m.onnx"] + list(more)  # noqa
    ck = cp("ck")
    case("export/good", E(), expect="ok", prep=ck, check=files_exist("m.onnx"))
    case("export/batch-1", E("--batch", "1"), expect="ok", prep=ck)
    case("export/batch-0", E("--batch", "0"), prep=ck, names=["--batch"])
    case("export/batch-max", E("--batch", "2147483648"), expect="any", prep=ck, names=["--batch"])
    case("export/batch-over", E("--batch", "2147483649"), prep=ck, names=["--batch"])
    case("export/model-other", E("--model", "lenet"), prep=ck, names=["--model", "lenet"])
    case("export/model-same", E("--model", "mlp"), expect="ok", prep=ck)
    case("export/model-bogus", E("--model", "vgg"), prep=ck, names=["--model", "vgg"])
    case("export/no-checkpoint", ["export", "-o", "$D/m.onnx"], names=["--checkpoint"])
    case("export/no-o", ["export", "--checkpoint", "$D/ck"], prep=ck, names=["-o", "--output"])
    case("export/checkpoint-missing", E(), names=["--checkpoint", "ck"])
    case("export/checkpoint-damaged", E(), prep=chain(ck, lambda D: _flip_file(
        os.path.join(D, "ck/checkpoint"))), names=["--checkpoint", "ck"])
    case("export/checkpoint-truncated", E(), prep=chain(ck, lambda D: _cut_file(
        os.path.join(D, "ck/checkpoint"))), names=["--checkpoint", "ck"])
    case("export/checkpoint-fifo", E(), prep=fifo("ck/checkpoint"),
         names=["--checkpoint", "ck"], timeout=20)
    case("export/checkpoint-is-file", ["export", "--checkpoint", "$D/ck/checkpoint", "-o",
                                       "$D/m.onnx"], prep=ck, expect="any",
         names=["--checkpoint", "ck"])
    case("export/onnx-checkpoint", ["export", "--checkpoint", "$D/ck_onnx", "-o", "$D/m.onnx"],
         prep=cp("ck_onnx"), expect="any", names=["--model", "--checkpoint", "ck_onnx"])
    case("export/onnx-checkpoint-model-mlp", ["export", "--checkpoint", "$D/ck_onnx", "-o",
                                              "$D/m.onnx", "--model", "mlp"],
         prep=cp("ck_onnx"), expect="any", names=["--model", "--checkpoint", "ck_onnx"])
    case("export/lenet-run", ["export", "--checkpoint", "$D/ckl", "-o", "$D/m.onnx"],
         prep=lambda D: shutil.copytree(os.path.join(FIX, "ck_lenet"), os.path.join(D, "ckl")),
         expect="ok")
    # the exported model runs, and imports
    case("export/then-run", ["run", "$D/e.onnx", "--input", "x=$D/x2.pb", "--output-dir", "$D/out"],
         expect="ok", prep=cp("e.onnx", "x2.pb"))
    case("export/then-run-batch-7", ["run", "$D/e.onnx", "--input", "x=$D/in.pb", "--output-dir",
                                     "$D/out"], expect="ok",
         prep=chain(cp("e.onnx"), lambda D: save_tensor(images(7), os.path.join(D, "in.pb"))))
    case("export/then-train", train_onnx("$D/e.onnx"), expect="ok", prep=cp("e.onnx"),
         check=epoch_rows_finite)
    case("export/then-import", ["import", "$D/e.onnx", "-o", "$D/e.tir", "--batch", "3"],
         expect="ok", prep=cp("e.onnx"))


def _flip_file(p):
    b = bytearray(open(p, "rb").read())
    b[len(b) // 2] ^= 1
    open(p, "wb").write(bytes(b))


def _cut_file(p):
    b = open(p, "rb").read()
    open(p, "wb").write(b[: len(b) // 2])


def add_onnx_train_cases():
    O = lambda *more, m="$D/mlp.onnx": train_onnx(m, *more)  # noqa: E731
    mlp = cp("mlp.onnx")

    def o(name, args, expect="ok", prep=mlp, names=None, **kw):
        kw.setdefault("check", epoch_rows_finite)
        case(f"train-onnx/{name}", args, expect=expect, prep=prep, names=names, **kw)

    o("mlp", O())
    o("cnn", O(m="$D/cnn.onnx"), prep=cp("cnn.onnx"))
    o("mlp-b10", O(m="$D/mlp_b10.onnx"), prep=cp("mlp_b10.onnx"))
    o("mlp-b10-batch-20", O("--batch", "20", m="$D/mlp_b10.onnx"), "refuse",
      prep=cp("mlp_b10.onnx"), names=["--batch", "mlp_b10.onnx", "10"])
    o("mlp-b10-batch-5", O("--batch", "5", m="$D/mlp_b10.onnx"), "refuse",
      prep=cp("mlp_b10.onnx"), names=["--batch", "mlp_b10.onnx", "10"])
    o("adamw-eps-0-lr-0.01", O("--optimizer", "adamw", "--eps", "0", "--lr", "0.01"), "nan",
      known="NaN loss undetected for an imported MLP with adamw --eps 0")
    def relu_logits():  # an MLP whose logits pass a ReLU: a NaN weight must still show
        m = mlp_model()
        m.graph.node[-1].output[0] = "z"
        m.graph.node.append(helper.make_node("Relu", ["z"], ["logits"], name="relu_out"))
        return m

    o("relu-logits-adamw-eps-0", O("--optimizer", "adamw", "--eps", "0", "--lr", "0.01",
                                   m="$D/r.onnx"), "nan", prep=onnx_file("r.onnx", relu_logits),
      known="NaN loss undetected for an imported MLP with adamw --eps 0")
    o("relu-logits-lr-3e38", O("--optimizer", "sgd", "--lr", "3e38", m="$D/r.onnx"), "nan",
      prep=onnx_file("r.onnx", relu_logits), known="ReLU/softmax swallow NaN")
    o("cnn-adamw-eps-0", O("--optimizer", "adamw", "--eps", "0", "--lr", "0.01",
                           m="$D/cnn.onnx"), "nan", prep=cp("cnn.onnx"))
    o("lr-3e38", O("--optimizer", "sgd", "--lr", "3e38"), "nan")
    o("reinit", O("--reinit"))
    o("reinit-normal", O("--reinit", "--init", "normal:0.01"))
    o("input-wrong", O("--input", "y"), "refuse", names=["--input", "y"])
    o("logits-wrong", O("--logits", "nope"), "refuse", names=["--logits", "nope"])
    o("logits-hidden", O("--logits", "hr"), "refuse", names=["--logits", "hr"])
    o("logits-input", O("--logits", "x"), "refuse", names=["--logits", "x"])
    o("input-is-weight", O("--input", "w1"), "refuse", names=["--input", "w1"])
    o("with-model", O("--model", "mlp"), "refuse", names=["--onnx", "--model"])
    o("input-without-onnx", train("--input", "x"), "refuse", names=["--input", "--onnx"])
    o("reinit-without-onnx", train("--reinit"), "refuse", names=["--reinit", "--onnx"])
    o("devices-2", O("--devices", "2"))
    o("devices-2-batch-3", O("--devices", "2", "--batch", "3"),
      known="batch 3 on 2 devices fails (oneDNN reduction primitive)")
    o("cnn-devices-3-batch-10", O("--devices", "3", m="$D/cnn.onnx"), prep=cp("cnn.onnx"))
    o("bf16", O("--precision", "bf16"))
    o("clip-label-smoothing", O("--clip-grad-norm", "1", "--label-smoothing", "0.1"))
    o("shard-updates", O("--devices", "2", "--shard-updates"))
    o("model-missing", O(m="$D/none.onnx"), "refuse", prep=None, names=["--onnx", "none.onnx"])
    o("model-is-tir", O(m="$D/mlp.tir"), "refuse", prep=cp("mlp.tir"), names=["--onnx", "mlp.tir"])
    o("model-fifo", O(m="$D/f.onnx"), "refuse", prep=fifo("f.onnx"), names=["--onnx", "f.onnx"],
      timeout=20)
    o("metrics-is-model", O("--metrics", "$D/mlp.onnx"), "refuse",
      names=["--metrics", "--onnx", "mlp.onnx"])
    o("trace-is-model", O("--trace", "$D/mlp.onnx"), "refuse",
      names=["--trace", "--onnx", "mlp.onnx"])
    o("metrics-is-model-via-symlink", O("--metrics", "$D/link"), "refuse",
      prep=chain(mlp, symlink("$D/mlp.onnx", "link")), names=["--metrics", "--onnx", "link"])
    o("checkpoint-dir-holds-model", O("--checkpoint", "$D"), "any",
      names=["--checkpoint"], allow_new=["checkpoint"])
    o("module-is-metrics", ["train", "--module", "$D/d.tir", "--model", "mlp"] +
      merged(TRAIN, ["--metrics", "$D/d.tir"]), "refuse", prep=cp("dump10.tir"),
      names=["--metrics", "--module", "d.tir"])
    CASES[-1].prep = lambda D: shutil.copy(os.path.join(FIX, "dump10.tir"),
                                           os.path.join(D, "d.tir"))
    o("checkpoint-then-resume-other-model",
      train_onnx("$D/cnn.onnx", "--epochs", "2", "--resume", "$D/ck_onnx"), "refuse",
      prep=cp("cnn.onnx", "ck_onnx"), names=["--onnx"])
    o("resume-same", train_onnx("$D/mlp.onnx", "--epochs", "2", "--resume", "$D/ck_onnx")[:],
      prep=cp("mlp.onnx", "ck_onnx"), may_change=["ck_onnx/*"])
    o("resume-weights-changed", train_onnx("$D/mlp.onnx", "--epochs", "2", "--resume",
                                           "$D/ck_onnx"), "any",
      prep=chain(cp("ck_onnx"), onnx_file("mlp.onnx", lambda: mlp_model())),
      names=["--resume", "--onnx"], may_change=["ck_onnx/*"])
    o("resume-zoo-ck", train_onnx("$D/mlp.onnx", "--epochs", "2", "--resume", "$D/ck"), "refuse",
      prep=cp("mlp.onnx", "ck"), names=["--resume", "ck", "--onnx", "mlp"])
    # the zoo mlp's checkpoint with its own settings, into an ONNX model that is also "mlp"
    o("resume-zoo-ck-same-settings",
      train_onnx("$D/mlp.onnx", "--epochs", "2", "--resume", "$D/ck", "--optimizer", "adamw",
                 "--weight-decay", "0.05", *CK_FLAGS), "refuse", prep=cp("mlp.onnx", "ck"),
      names=["--resume"])


# The first run trains long enough (LONG: many epochs) that the second, started a moment
# later, meets it whatever the machine's load; two short runs may not overlap at all.
TWO_AT_ONCE = ("TANDEM LONG > $D/o1 2> $D/e1 & p1=$!; sleep 0.5; TANDEM CMD > $D/o2 2> $D/e2 & "
               "p2=$!; wait $p1; r1=$?; wait $p2; r2=$?; echo rc=$r1; echo rc=$r2; "
               "cat $D/e1 $D/e2 >&2; [ $r1 = 0 ] || [ $r2 = 0 ]")


def add_concurrency_cases():
    """Two runs at once on one output: one of them must refuse."""
    for name, flags, flag in [("metrics", ["--metrics", "$D/m.csv"], "--metrics"),
                              ("checkpoint", ["--checkpoint", "$D/c"], "--checkpoint"),
                              ("trace", ["--trace", "$D/t.json"], "--trace")]:
        cmd = " ".join(shlex.quote(x) for x in train(*flags))
        # A trace is written once, when its window of steps is traced (then the run lets the
        # file go): the long run's window lasts the run, so that it still holds the file.
        more = ["--trace-steps", "100000"] if name == "trace" else []
        long = " ".join(shlex.quote(x) for x in train(*flags, "--epochs", "400", *more))

        def check(c, D, rc, out, err, flag=flag):
            if re.findall(r"rc=(\d+)", out) == ["0", "0"]:
                return [("accepted-bad-input", f"two trains on one {flag} both exited 0")]
            return []

        case(f"concurrent/two-trains-one-{name}",
             TWO_AT_ONCE.replace("LONG", long).replace("CMD", cmd), expect="any",
             shell=True, check=check, names=[flag], allow_new=["*"],
             known="two trains on one --metrics file" if name == "metrics" else None)
    # A refused train does not empty an existing metrics file (known), a trace file, a plot.
    for flag, fname in [("--metrics", "m.csv"), ("--trace", "t.json"), ("--plot", "p.svg")]:
        case(f"refused-keeps/{flag[2:]}", train(flag, f"$D/{fname}", "--limit-test", "31"),
             prep=write(fname, b"precious\n"), names=["--limit-test"],
             known="a refused train empties an existing --metrics file"
             if flag == "--metrics" else None)
        case(f"refused-late-keeps/{flag[2:]}", ["train", "--model", "mlp", "--data", "$D/data",
                                                "--limit-train", "20", "--limit-test", "10",
                                                "--batch", "10", "--epochs", "1", flag,
                                                f"$D/{fname}"],
             prep=chain(write(fname, b"precious\n"), lambda D: write_data(
                 os.path.join(D, "data"), **{"t10k-labels": idx_labels(30, labels=[99] * 30)})),
             names=["--data", "t10k", "label"])
    case("refused-keeps/nan-metrics", train("--metrics", "$D/m.csv", "--lr", "3e38", "--optimizer",
                                            "sgd"), expect="nan", prep=write("m.csv", b"old\n"),
         may_change=["m.csv"])
    case("train-ok/metrics-stdout", train("--metrics", "-"), expect="ok")
    case("train-ok/plot", train("--plot", "$D/p.svg"), expect="ok", check=files_exist("p.svg"))
    case("train-ok/trace", train("--trace", "$D/t.json", "--trace-steps", "100"), expect="ok")
    case("train-ok/metrics-trace-same", train("--metrics", "$D/m", "--trace", "$D/m"),
         names=["--metrics", "--trace"])
    case("train-ok/metrics-plot-same", train("--metrics", "$D/m.svg", "--plot", "$D/m.svg"),
         names=["--metrics", "--plot"])
    case("train-ok/metrics-is-checkpoint", train("--metrics", "$D/c/checkpoint", "--checkpoint",
                                                 "$D/c"), names=["--metrics", "--checkpoint"])
    case("train-ok/metrics-is-lock", train("--metrics", "$D/c/checkpoint.lock", "--checkpoint",
                                           "$D/c"), names=["--metrics", "--checkpoint"])
    case("train-ok/trace-in-checkpoint-dir-tmp",
         train("--trace", "$D/c/.checkpoint.tmp", "--checkpoint", "$D/c"), expect="any",
         names=["--trace", "--checkpoint"], allow_new=["c/*"])


# ---------------------------------------------------------------------------------------
# Running


def snapshot(root):
    """path -> (kind, sha256 of contents or link target); FIFOs are never opened."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                snap[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                try:
                    with open(p, "rb") as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            h.update(chunk)
                    snap[rel] = ("file", h.hexdigest())
                except OSError:
                    snap[rel] = ("file", "unreadable")
            elif stat.S_ISDIR(st.st_mode):
                snap[rel] = ("dir", "")
            else:
                snap[rel] = ("other", stat.S_IFMT(st.st_mode))
    return snap


def matches(rel, globs):
    import fnmatch
    return any(fnmatch.fnmatch(rel, g) for g in globs)


def expand(s, D):
    return s.replace("$D", D).replace("$F", FIX)


def run_case(c, workdir, timeout):
    try:
        return run_case_in(c, workdir, timeout)
    except Exception as e:  # noqa: BLE001  a bug of the probe, said as such
        return c, None, "", "", 0.0, [("probe-error", repr(e))], ""


def run_case_in(c, workdir, timeout):
    D = os.path.join(workdir, f"{CASES.index(c):04d}-" + re.sub(r"[^\w.-]+", "_", c.name)[:80])
    os.makedirs(D)
    os.chmod(D, 0o777)
    findings = []
    try:
        if c.prep:
            c.prep(D)
    except Exception as e:  # noqa: BLE001
        return c, None, "", "", 0.0, [("probe-error", f"prep failed: {e!r}")], ""
    if c.user:
        uid = pwd.getpwnam(c.user).pw_uid
        for dirpath, dirnames, filenames in os.walk(D):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o222 == 0:
                    continue  # the unwritable directory stays root's
                if not stat.S_ISLNK(st.st_mode):
                    os.chown(p, uid, -1)
    before = snapshot(D)
    if c.shell:
        argv = ["/bin/sh", "-c", expand(c.args, D).replace("TANDEM", shlex.quote(TANDEM))]
        shown = expand(c.args, D).replace("TANDEM", "tandem")
    else:
        argv = [TANDEM] + [expand(a, D) for a in c.args]
        shown = "tandem " + " ".join(shlex.quote(a) for a in argv[1:])
    pre = None
    if c.user:
        pw = pwd.getpwnam(c.user)

        def pre():
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

    t0 = time.monotonic()
    limit = c.timeout or timeout
    p = subprocess.Popen(argv, cwd=D, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, preexec_fn=pre)
    hung = False
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        hung = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    elapsed = time.monotonic() - t0
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    rc = p.returncode
    after = snapshot(D)
    findings += classify(c, D, rc, out, err, hung, before, after, limit)
    return c, rc, out, err, elapsed, findings, shown


def classify(c, D, rc, out, err, hung, before, after, limit):
    f = []
    if hung:
        return [("hang", f"still running after {limit} s")]
    if rc < 0 or rc >= 128:
        sig = -rc if rc < 0 else rc - 128
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = str(sig)
        f.append(("crash", f"exit {rc} ({signame})"))
    refused = rc not in (0, 3) and not f
    # the exit code against what the case expects
    if not f:
        if c.expect == "refuse":
            if rc == 0:
                f.append(("accepted-bad-input", "exit 0"))
            elif rc == 3:
                f.append(("wrong-exit-code", "exit 3 (a non-finite loss) for bad input"))
            elif rc not in (2, 5):
                f.append(("wrong-exit-code", f"exit {rc}"))
        elif c.expect == "ok":
            if rc != 0:
                f.append(("rejected-good-input", f"exit {rc}"))
        elif c.expect == "nan":
            if rc == 0:
                f.append(("nan-undetected", "exit 0, expected 3"))
            elif rc != 3:
                f.append(("wrong-exit-code", f"exit {rc}, expected 3"))
        elif c.expect == "any":
            if rc not in (0, 2, 3, 5):
                f.append(("wrong-exit-code", f"exit {rc}"))
    # the message
    lines = err.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # The one report of several lines: an ONNX model's refusals, one indented line per op
    # type under the line that counts them (README, docs/ONNX.md).
    refusal = any(ln.startswith("tandem: ") and "Tandem does not support" in ln and
                  ln.endswith(":") for ln in lines)
    stray = [ln for ln in lines if not ln.startswith("tandem: ") and
             not (refusal and ln.startswith("  "))]
    errors = [ln for ln in lines if ln.startswith("tandem: ") and
              not ln.startswith("tandem: warning: ")]
    if c.shell:
        stray = []
        errors = errors[:1]
    if stray:
        f.append(("message-not-one-line-or-unnamed",
                  f"standard error has {len(stray)} line(s) not 'tandem: ...': {stray[0][:200]!r}"))
    if rc not in (0,) and not c.shell:
        if len(errors) != 1:
            f.append(("message-not-one-line-or-unnamed",
                      f"{len(errors)} error lines (expected 1)"))
        if err and not err.endswith("\n"):
            f.append(("message-not-one-line-or-unnamed", "standard error does not end a line"))
        if errors:
            msg = errors[-1]
            if len(msg) > MAX_LINE:
                f.append(("message-not-one-line-or-unnamed",
                          f"a {len(msg)}-character line (quotes too much)"))
            names = c.names
            if names is None:
                names = default_names(c)
            if rc == 3:  # a non-finite loss: the line names the epoch and step
                names = ["at epoch"]
            names = [expand(n, D) for n in names]
            # a short name must be in the line itself, not in the scratch paths it quotes
            root = os.path.dirname(os.path.dirname(D))
            bare = msg.replace(D, "$D").replace(root, "$ROOT")
            if names and not any(n in (msg if "/" in n else bare) for n in names):
                f.append(("message-not-one-line-or-unnamed",
                          f"names none of {names[:6]}"))
            if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", msg):
                f.append(("message-not-one-line-or-unnamed", "control characters in the line"))
    # files: inputs and files that were there must not change, no leftovers
    may = list(c.may_change) if rc in (0, 3) else []
    for rel, (kind, h) in before.items():
        if matches(rel, may) or os.path.basename(rel) == "checkpoint.lock":
            continue  # (the lock file's contents are the run's own: its process id)
        now = after.get(rel)
        if now is None:
            f.append(("data-lost", f"{rel} was removed"))
        elif now != (kind, h) and kind != "dir":
            f.append(("data-lost", f"{rel} was changed ({kind} -> {now[0]})"))
    for rel, (kind, h) in after.items():
        if rel in before:
            continue
        base = os.path.basename(rel)
        if LEFTOVER.search(base) and not matches(rel, c.allow_new):
            f.append(("data-lost", f"left {rel}"))
        elif refused and LEFTOVER_REFUSED.search(base) and not c.shell:
            f.append(("data-lost", f"a refused run left {rel}"))
        elif refused and kind == "file" and not matches(rel, c.allow_new) and not c.shell:
            f.append(("data-lost", f"a refused run left {rel}"))
    if c.check:
        f += c.check(c, D, rc, out, err)
    return f


def default_names(c):
    if c.shell:
        return []
    names = []
    for a in c.args:
        if a.startswith("-"):
            names.append(a.split("=")[0])
        elif "/" in a:
            names += [a, os.path.basename(a.rstrip("/"))]
    return names


# ---------------------------------------------------------------------------------------
# Fixtures


def build_fixtures(F):
    def t(*args, ok=(0,)):
        r = subprocess.run([TANDEM] + list(args), capture_output=True, text=True, timeout=300)
        if r.returncode not in ok:
            sys.exit(f"hostile_probe: fixture step failed: tandem {' '.join(args)}: exit "
                     f"{r.returncode}: {r.stderr.strip()}")
        return r

    write_data(os.path.join(F, "data"))
    save(mlp_model(), os.path.join(F, "mlp.onnx"))
    save(mlp_model(batch=10), os.path.join(F, "mlp_b10.onnx"))
    save(cnn_model(), os.path.join(F, "cnn.onnx"))
    save_tensor(images(2), os.path.join(F, "x2.pb"))
    t("import", os.path.join(F, "mlp.onnx"), "-o", os.path.join(F, "mlp.tir"), "--batch", "2")
    t("import", os.path.join(F, "cnn.onnx"), "-o", os.path.join(F, "cnn.tir"), "--batch", "2")
    save(scaled_model(0.5), os.path.join(F, "scaled.onnx"))
    t("import", os.path.join(F, "scaled.onnx"), "-o", os.path.join(F, "scaled.tir"), "--batch",
      "2")
    base = ["--data", os.path.join(F, "data"), "--limit-train", "20", "--limit-test", "10",
            "--batch", "10", "--epochs", "1"]
    t("train", "--model", "mlp", *base, *CK_FLAGS, "--checkpoint", os.path.join(F, "ck"),
      "--metrics", os.path.join(F, "m.csv"))
    t("train", "--model", "mlp", *base, "--checkpoint", os.path.join(F, "ck_cos"))
    t("train", "--model", "lenet", *base, "--checkpoint", os.path.join(F, "ck_lenet"))
    t("train", "--onnx", os.path.join(F, "mlp.onnx"), *base, "--checkpoint",
      os.path.join(F, "ck_onnx"))
    t("export", "--checkpoint", os.path.join(F, "ck"), "-o", os.path.join(F, "e.onnx"))
    t("dump", "--model", "mlp", "--batch", "8", "-o", os.path.join(F, "dump.tir"))
    t("dump", "--model", "mlp", "--batch", "10", "-o", os.path.join(F, "dump10.tir"))
    for dirpath, dirnames, filenames in os.walk(F):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)


def all_cases():
    add_cli_cases()
    add_range_cases()
    add_checkpoint_cases()
    add_data_cases()
    add_output_cases()
    add_import_cases()
    add_onnx_model_cases()
    add_run_cases()
    add_tir_cases()
    add_module_cases()
    add_export_cases()
    add_onnx_train_cases()
    add_concurrency_cases()
    return CASES


TANDEM = None


def main():
    global TANDEM, FIX
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem", default="build/tools/tandem", help="the tandem binary")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--only", action="append", default=[],
                    help="run only cases whose name contains this (repeatable)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60, help="seconds a case may run")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every case as it ends")
    args = ap.parse_args()
    cases = all_cases()
    if args.only:
        cases = [c for c in cases if any(o in c.name for o in args.only)]
    if args.list:
        for c in cases:
            print(f"{c.name}  [{c.expect}]" + (f"  (known: {c.known})" if c.known else ""))
        print(f"{len(cases)} cases")
        return 0
    TANDEM = os.path.abspath(args.tandem)
    if not os.access(TANDEM, os.X_OK):
        sys.exit(f"hostile_probe: --tandem {args.tandem}: not an executable")
    work = tempfile.mkdtemp(prefix="hostile_probe.")
    os.chmod(work, 0o755)
    FIX = os.path.join(work, "fixtures")
    os.makedirs(FIX)
    t0 = time.monotonic()
    build_fixtures(FIX)
    fix_before = snapshot(FIX)
    print(f"hostile_probe: {len(cases)} cases against {TANDEM} (fixtures in "
          f"{time.monotonic() - t0:.0f} s; scratch {work})", flush=True)
    cases_dir = os.path.join(work, "cases")
    os.makedirs(cases_dir)
    os.chmod(cases_dir, 0o755)
    results = []
    lock = threading.Lock()
    done = [0]

    def one(c):
        r = run_case(c, cases_dir, args.timeout)
        with lock:
            done[0] += 1
            findings = r[5]
            cls = findings[0][0] if findings else "ok"
            if args.verbose or cls != "ok":
                print(f"[{done[0]}/{len(cases)}] {cls:32s} {c.name} ({r[4]:.1f} s)", flush=True)
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        results = list(ex.map(one, cases))
    fix_after = snapshot(FIX)
    order = {c.name: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[r[0].name])
    counts = {k: 0 for k in CLASSES}
    known = {k: 0 for k in CLASSES}
    bad = []
    for c, rc, out, err, elapsed, findings, shown in results:
        cls = findings[0][0] if findings else "ok"
        counts[cls] = counts.get(cls, 0) + 1
        if findings and c.known:
            known[cls] = known.get(cls, 0) + 1
        if findings:
            bad.append((c, rc, out, err, findings, shown, elapsed))
    if fix_after != fix_before:
        changed = sorted(k for k in set(fix_before) | set(fix_after)
                         if fix_before.get(k) != fix_after.get(k))
        counts["data-lost"] += 1
        bad.append((Case("fixtures", []), None, "", "", [("data-lost",
                    f"the shared fixtures changed: {changed[:5]}")], "(some case)", 0))
    print(f"\n{len(results)} cases in {time.monotonic() - t0:.0f} s\n")
    print(f"{'class':34s} count  (of them a case for a known defect)")
    for k, n in counts.items():
        print(f"{k:34s} {n:5d}" + (f"  ({known[k]})" if known.get(k) else ""))
    if bad:
        print("\nNot ok:")
    for c, rc, out, err, findings, shown, elapsed in bad:
        print(f"\n[{findings[0][0]}] {c.name}" + (f"   (known: {c.known})" if c.known else ""))
        print(f"  $ {shown}")
        print(f"  exit {rc} after {elapsed:.1f} s; expected {c.expect}")
        for cls, detail in findings:
            print(f"  - {cls}: {detail}")
        tail = err.strip().split("\n")
        for ln in tail[-3:]:
            if ln:
                print(f"  stderr: {ln[:400]}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
