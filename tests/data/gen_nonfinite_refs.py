#!/usr/bin/python3
"""Writes PyTorch's results of every op that computes on floats over inputs holding NaN,
+inf, -inf, -0.0 and subnormals (1e-40) beside ordinary values.

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_nonfinite_refs.py

It rewrites tests/data/nonfinite_refs/*.ref in gen_transformer_refs.py's format (its
docstring; values written %.9g, so nan, inf, -inf and -0 appear as such, and f64
tensors %.17g), read by tests/backend/nonfinite_ops_test.cc, which runs each case as one
node on the CPU kernels and fails for an op of ir/ops.td that computes on floats and has
no case here. Each case is one node:

    attr _op NAME          the op (its text name in ir/ops.td)
    attr NAME VALUE        the node's attributes (ints as 1,2,3; bools 0/1; enums a word)
    attr _var<i> V:ROLE    operand i is read from variable @V of role ROLE (param,
                           optimizer, buffer, fed): the updates and running statistics
                           written in place
    attr _tol T            finite values agree to T of the tensor's largest finite value
                           (default 1e-5)
    attr _exact 1          every value bit for bit (NaN payloads aside): -0.0, subnormals
                           (ops whose results are single roundings: copies, relu, casts)
    attr _dropout 1        dropout: out0_kept and out0_dropped are PyTorch's x * noise
                           for noise = 1/(1-p) and 0; the test takes the kernel's mask
    tensor in<i> ...       operand i (f32, bf16, i32 or f64)
    tensor out<r> ...      result r as PyTorch computes it
    tensor after<i> ...    operand i after the node ran (state updated in place)

Each case runs the op as PyTorch does it: the functional op (F.relu, F.max_pool2d, ...),
torch.native_batch_norm, the aten backward ops on given saved tensors
(threshold_backward, _softmax_backward_data, ...), autograd for the gradients of layers,
torch.optim.SGD / AdamW steps from preset state, torch.nn.utils.clip_grad_norm_ and
torch.nn.utils.fusion.fuse_conv_bn_weights. The fused ops' references are composed of
PyTorch's batch norm, residual add and relu on the same values; their f64 statistics are
count, sum and m * var + m * mean^2 in double from PyTorch's tensors.

The fused attention (attention, attention_backward, attention_cached): PyTorch 1.13 has no
F.scaled_dot_product_attention, so the reference is its definition written out, as its math
backend computes it: per batch row and head, softmax(scale q k^T) v over the keys a query
sees (causal: keys 0..i, the others not read at all, as FlashAttention and PyTorch 2's flash
backend skip them: a NaN in a future key's value does not reach an earlier query), and the
log-sum-exp m + log(sum(exp(s - m))) with m the row's maximum (NaN for a row holding +inf or
only -inf, whose softmax is NaN). The backward is autograd of that, from specials in dy
(NaN, -0.0, subnormals) and a NaN in q; an infinite dy is left out: where it meets the
probabilities, rowsum(dy * y) (FlashAttention-2's and PyTorch 2's flash backward) and
autograd's rowsum(dP * P) differ in which inf - inf they form.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nonfinite_refs")
NAN, INF = float("nan"), float("inf")
SUB = 1e-40  # an f32 subnormal (and a bf16 one)
# The special values, in the order they are planted.
SPECIALS = [NAN, INF, -INF, -0.0, SUB, -SUB]


class NCase(Case):
    """A case of one node: attrs, operands in<i>, results out<r>, state after<i>."""

    def __init__(self, name, op, what):
        super().__init__(name, what)
        self.lines[1] = self.lines[1].replace("gen_transformer_refs.py", "gen_nonfinite_refs.py")
        self.name = name
        self.attr("_op", op)

    def tensor(self, name, t, dtype=None):
        t = t.detach().contiguous()
        if dtype is None:
            dtype = {torch.int64: "i32", torch.int32: "i32", torch.float64: "f64",
                     torch.bfloat16: "bf16"}.get(t.dtype, "f32")
        if dtype == "i32":
            values = [str(int(v)) for v in t.reshape(-1).tolist()]
        elif dtype == "f64":
            values = ["%.17g" % v for v in t.double().reshape(-1).tolist()]
        else:
            values = ["%.9g" % v for v in t.float().reshape(-1).tolist()]
        self.lines.append(f"tensor {name} {dtype} " + " ".join(str(d) for d in t.shape))
        self.lines.append(" ".join(values))
        return self

    def ints(self, name, values):
        self.lines.append(f"attr {name} " + ",".join(str(v) for v in values))
        return self

    def var(self, i, name, role):
        self.lines.append(f"attr _var{i} {name}:{role}")
        return self

    def ins(self, *ts):
        for i, t in enumerate(ts):
            self.tensor(f"in{i}", t)
        return self

    def outs(self, *ts):
        for i, t in enumerate(ts):
            self.tensor(f"out{i}", t)
        return self

    def write(self):
        with open(os.path.join(OUT, self.name + ".ref"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def plant(t, at, values=SPECIALS):
    """t with values[k] at flat index at[k] (specials beside t's ordinary values)."""
    t = t.clone()
    flat = t.view(-1)
    for i, v in zip(at, values):
        flat[i] = v
    return t


def special(*shape, at=None, scale=1.0):
    """N(0, scale^2) values of `shape` with the specials planted at `at` (default: spread
    evenly over the tensor)."""
    t = torch.randn(*shape) * scale
    if at is None:
        at = [(2 * k + 1) * t.numel() // (2 * len(SPECIALS)) for k in range(len(SPECIALS))]
    return plant(t, at)


def bf16(t):
    return t.to(torch.bfloat16)


def leaf(t):
    return t.clone().requires_grad_()


# --- elementwise ------------------------------------------------------------------------
def row_of_specials(n=24):
    """Every special and ordinary values, including large ones where exp saturates."""
    t = torch.randn(n) * 2
    t[:10] = torch.tensor([NAN, INF, -INF, -0.0, 0.0, SUB, -SUB, 30.0, -30.0, 100.0])
    return t


def autograd_of(fn):
    """fn's backward as autograd computes it, dx(dy, x), for ops with no aten backward."""
    def bwd(dy, x):
        xl = leaf(x)
        fn(xl).backward(dy)
        return xl.grad
    return bwd


def unary_cases():
    x = row_of_specials()
    NCase("relu", "relu", "F.relu").ins(x).outs(F.relu(x)).attr("_exact", 1).write()
    xb = bf16(x)
    NCase("relu_bf16", "relu", "F.relu on bf16").ins(xb).outs(F.relu(xb)).attr("_exact", 1).write()
    dy = plant(torch.randn(24), [11, 12, 13, 14], [NAN, INF, -INF, NAN])
    y = F.relu(x)
    # relu_backward reads relu's output: threshold_backward(dy, y, 0) = (y <= 0 ? 0 : dy);
    # a NaN output passes the gradient, a NaN gradient where y <= 0 is dropped.
    NCase("relu_backward", "relu_backward", "threshold_backward(dy, relu(x), 0)") \
        .ins(dy, y).outs(torch.ops.aten.threshold_backward(dy, y, 0)).attr("_exact", 1).write()
    NCase("relu_backward_bf16", "relu_backward", "threshold_backward in bf16") \
        .ins(bf16(dy), bf16(y)).outs(torch.ops.aten.threshold_backward(bf16(dy), bf16(y), 0)) \
        .attr("_exact", 1).write()
    for op, fn, bwd, from_output in [
            ("sigmoid", torch.sigmoid, torch.ops.aten.sigmoid_backward, True),
            ("tanh", torch.tanh, torch.ops.aten.tanh_backward, True),
            ("gelu", F.gelu, lambda dy, x: torch.ops.aten.gelu_backward(dy, x), False),
            ("gelu_tanh", lambda v: F.gelu(v, approximate="tanh"),
             lambda dy, x: torch.ops.aten.gelu_backward(dy, x, approximate="tanh"), False),
            ("softsign", F.softsign, autograd_of(F.softsign), False),
            ("hardswish", F.hardswish, torch.ops.aten.hardswish_backward, False),
            ("hardsigmoid", F.hardsigmoid, torch.ops.aten.hardsigmoid_backward, False),
            ("relu6", F.relu6,
             lambda dy, x: torch.ops.aten.hardtanh_backward(dy, x, 0.0, 6.0), False)]:
        y = fn(x)
        NCase(op, op, f"{op} of specials").ins(x).outs(y).write()
        NCase(f"{op}_bf16", op, f"{op} of specials in bf16").ins(bf16(x)) \
            .outs(bf16(fn(bf16(x).float()))) \
            .attr("_tol", 1e-2).write()
        saved = y if from_output else x
        NCase(f"{op}_backward", f"{op}_backward",
              f"aten {op} backward from its {'output' if from_output else 'input'}") \
            .ins(dy, saved).outs(bwd(dy, saved)).write()
        sb, dyb = bf16(saved), bf16(dy)
        NCase(f"{op}_backward_bf16", f"{op}_backward", f"aten {op} backward in bf16") \
            .ins(dyb, sb).outs(bf16(bwd(dyb.float(), sb.float()))).attr("_tol", 1e-2).write()
    NCase("cast_to_bf16", "cast", "x.to(torch.bfloat16): rounded to nearest even, NaN stays NaN") \
        .attr("dtype", "bf16").ins(x * 1.001).outs(bf16(x * 1.001)).attr("_exact", 1).write()
    big = torch.tensor([3.4e38, -3.4e38, 3.3e38, 1.17e-38, 9e-39])  # to inf; subnormals
    xs = torch.cat([x, big])
    NCase("cast_to_bf16_edges", "cast", "rounding to bf16 overflows to inf, keeps subnormals") \
        .attr("dtype", "bf16").ins(xs).outs(bf16(xs)).attr("_exact", 1).write()
    NCase("cast_to_f32", "cast", "bf16 -> f32 is exact").attr("dtype", "f32") \
        .ins(bf16(x)).outs(bf16(x).float()).attr("_exact", 1).write()
    for factor in (0.5, 0.0, -2.0):
        name = {0.5: "scale", 0.0: "scale_zero", -2.0: "scale_negative"}[factor]
        NCase(name, "scale", f"x * {factor} (0 * inf is NaN, -x * 0 is -0)") \
            .attr("factor", factor).ins(x).outs(x * factor).attr("_exact", 1).write()


def binary_cases():
    a = row_of_specials()
    b = plant(torch.randn(24), [0, 1, 2, 3, 4, 5, 6], [1.0, -INF, INF, -0.0, -SUB, SUB, NAN])
    NCase("add", "add", "a + b: inf + -inf is NaN, -0 + -0 is -0").ins(a, b).outs(a + b) \
        .attr("_exact", 1).write()
    NCase("add_bf16", "add", "a + b in bf16").ins(bf16(a), bf16(b)).outs(bf16(a) + bf16(b)) \
        .attr("_exact", 1).write()
    a3 = special(2, 3, 4)
    b1 = plant(torch.randn(1, 3, 1), [1], [INF])
    NCase("add_bcast", "add_bcast", "a + b broadcast").ins(a3, b1).outs(a3 + b1) \
        .attr("_exact", 1).write()
    b2 = plant(torch.randn(4), [2, 3], [0.0, NAN])
    NCase("mul_bcast", "mul_bcast", "a * b broadcast: 0 * inf is NaN").ins(a3, b2) \
        .outs(a3 * b2).attr("_exact", 1).write()


def dropout_case():
    x = row_of_specials(40).reshape(4, 10)
    p = 0.5
    c = NCase("dropout", "dropout", "F.dropout: x * noise, noise 0 or 1/(1-p): a dropped NaN "
              "or inf is NaN, a dropped -x is -0")
    c.attr("p", p).attr("mask_id", 3).attr("sample_offset", 0).attr("_dropout", 1)
    c.var(1, "step", "fed")
    c.ins(x, torch.tensor([5], dtype=torch.int32))
    c.tensor("out0_kept", x * torch.full_like(x, 1 / (1 - p)))
    c.tensor("out0_dropped", x * torch.zeros_like(x))
    c.write()


# --- softmax, reductions ------------------------------------------------------------------
def softmax_rows():
    rows = [[NAN, -1, 2, INF], [1, -1, 2, INF], [1, -1, -INF, 3], [-INF] * 4, [1, -1, NAN, 3],
            [0.5, -0.0, SUB, 2], [-1, 2, -INF, -INF]]
    return torch.tensor(rows)


def softmax_cases():
    x = softmax_rows()
    x3 = plant(torch.randn(2, 5, 3), [1, 4, 17, 20, 23], [NAN, INF, -INF, -0.0, SUB])
    dy = plant(torch.randn(7, 4), [21, 22], [NAN, INF])
    for log in (False, True):
        op = "log_softmax" if log else "softmax"
        fn = F.log_softmax if log else F.softmax
        bwd = torch.ops.aten._log_softmax_backward_data if log else \
            torch.ops.aten._softmax_backward_data
        y = fn(x, -1)
        NCase(op, op, f"{op} over rows of specials (NaN, +inf or all -inf: a NaN row)") \
            .attr("axis", -1).ins(x).outs(y).write()
        NCase(f"{op}_bf16", op, f"{op} in bf16").attr("axis", 1).ins(bf16(x)) \
            .outs(bf16(fn(bf16(x).float(), 1))).attr("_tol", 1e-2).write()
        NCase(f"{op}_middle", op, f"{op} over a middle axis").attr("axis", 1).ins(x3) \
            .outs(fn(x3, 1)).write()
        NCase(f"{op}_backward", f"{op}_backward", f"aten {op} backward from the output y") \
            .attr("axis", -1).ins(dy, y).outs(bwd(dy, y, -1, torch.float32)).write()


def reduce_cases():
    x = plant(torch.randn(3, 4, 5), [0, 6, 27, 33, 41, 47], [NAN, INF, -INF, INF, -0.0, SUB])
    for op, fn in [("reduce_sum", torch.sum), ("reduce_mean", torch.mean)]:
        for axis, keep in [(1, False), (-1, True), (0, False)]:
            NCase(f"{op}_axis{axis}".replace("-", "_minus"), op, f"torch.{fn.__name__} over one axis (inf + -inf: NaN)") \
                .attr("axis", axis).attr("keepdim", keep).ins(x).outs(fn(x, axis, keepdim=keep)) \
                .write()
        NCase(f"{op}_bf16", op, f"torch.{fn.__name__} of bf16 values, rounded once") \
            .attr("axis", 1).ins(bf16(x)).outs(bf16(fn(bf16(x).float(), 1))).attr("_tol", 1e-2) \
            .write()
        xl = leaf(x)
        y = fn(xl, 1)
        dy = plant(torch.randn(*y.shape), [2, 5], [NAN, -INF])
        y.backward(dy)
        NCase(f"{op}_backward", f"{op}_backward", "autograd of the reduction").attr("axis", 1) \
            .ins(dy, x).outs(xl.grad).attr("_exact", 1).write()


# --- data movement ------------------------------------------------------------------------
def movement_cases():
    x = special(2, 3, 4)
    NCase("flatten", "flatten", "torch.flatten(x, 1)").ins(x).outs(x.flatten(1)) \
        .attr("_exact", 1).write()
    NCase("flatten_backward", "flatten_backward", "dy reshaped").ins(x.flatten(1), x).outs(x) \
        .attr("_exact", 1).write()
    NCase("reshape", "reshape", "x.reshape(4, -1)").ints("shape", [4, -1]).ins(x) \
        .outs(x.reshape(4, -1)).attr("_exact", 1).write()
    NCase("transpose", "transpose", "x.permute(2, 0, 1)").ints("perm", [2, 0, 1]).ins(x) \
        .outs(x.permute(2, 0, 1)).attr("_exact", 1).write()
    y = plant(torch.randn(2, 1, 4), [0, 5], [-INF, NAN])
    NCase("concat_axis", "concat_axis", "torch.cat").attr("axis", 1).ins(x, y) \
        .outs(torch.cat([x, y], 1)).attr("_exact", 1).write()
    NCase("slice_axis", "slice_axis", "x[:, 1:3]").attr("axis", 1).attr("start", 1) \
        .attr("end", 3).ins(x).outs(x[:, 1:3]).attr("_exact", 1).write()
    xl = leaf(x)
    dy = special(2, 2, 4)
    xl[:, 1:3].backward(dy)
    NCase("slice_axis_backward", "slice_axis_backward", "autograd of x[:, 1:3]") \
        .attr("axis", 1).attr("start", 1).ins(dy, x).outs(xl.grad).attr("_exact", 1).write()


# --- pooling ------------------------------------------------------------------------------
def pool_input():
    """[1, 2, 6, 6]: 2x2 windows holding NaN, two NaNs, +inf beside -inf (whose sum is NaN),
    all -inf, -0.0 and subnormals; channel 1 ordinary."""
    x = torch.randn(1, 2, 6, 6)
    p = x[0, 0]
    p[0, 0] = NAN                      # window (0,0)
    p[0, 2], p[1, 3] = NAN, NAN        # window (0,1): two NaNs (PyTorch takes the last)
    p[0, 4], p[1, 5] = INF, -INF       # window (0,2): inf beside -inf
    p[2:4, 0:2] = -INF                 # window (1,0): all -inf
    p[2, 2], p[2, 3], p[3, 2], p[3, 3] = -0.0, SUB, -SUB, 0.0  # window (1,1)
    p[4, 4] = -INF                     # window (2,2): one -inf
    return x


def pool_cases():
    x = pool_input()
    for k, s, pad in [(2, 2, 0), (3, 2, 1)]:
        tag = f"k{k}s{s}p{pad}"
        for kind, fn in [("max", F.max_pool2d),
                         ("avg", lambda v, k, s, p: F.avg_pool2d(v, k, s, p,
                                                                 count_include_pad=True))]:
            op = f"{kind}_pool2d"
            xl = leaf(x)
            y = fn(xl, k, s, pad)
            dy = plant(torch.randn(*y.shape), [y.numel() - 1], [NAN])
            y.backward(dy)
            c = NCase(f"{op}_{tag}", op, f"F.{op}({k}, {s}, {pad})")
            c.attr("kernel", k).attr("stride", s).attr("pad", pad).ins(x).outs(y)
            if kind == "max":
                c.attr("_exact", 1)
            c.write()
            c = NCase(f"{op}_backward_{tag}", f"{op}_backward",
                      "autograd: max routes dy to the (last) NaN, else the first maximum")
            c.attr("kernel", k).attr("stride", s).attr("pad", pad).ins(dy, x).outs(xl.grad)
            if kind == "max":
                c.attr("_exact", 1)
            c.write()
    xb = bf16(x)
    NCase("max_pool2d_bf16", "max_pool2d", "F.max_pool2d(2, 2) in bf16").attr("kernel", 2) \
        .attr("stride", 2).attr("pad", 0).ins(xb).outs(bf16(F.max_pool2d(xb.float(), 2, 2))) \
        .attr("_exact", 1).write()
    xl = leaf(x)
    y = xl.mean((2, 3), keepdim=True)
    dy = plant(torch.randn(*y.shape), [1], [INF])
    y.backward(dy)
    NCase("global_avg_pool", "global_avg_pool", "x.mean((2, 3))").ins(x).outs(y).write()
    NCase("global_avg_pool_backward", "global_avg_pool_backward", "autograd of the mean") \
        .ins(dy, x).outs(xl.grad).write()


# --- layers -------------------------------------------------------------------------------
def conv_input():
    x = torch.randn(2, 3, 6, 6)
    x[0, 0, 1, 1] = NAN
    x[0, 1, 4, 4] = INF
    x[1, 2, 0, 5] = -INF
    x[1, 0, 3, 3] = -0.0
    x[1, 1, 2, 2] = SUB
    return x


def conv_case(name, xs, ws, bs, s, p, g=1):
    """conv2d of x, w, b? (stride s, pad p, g groups) and its two backward ops, from
    PyTorch's forward and autograd with a non-finite output gradient."""
    xl, wl = leaf(xs), leaf(ws)
    bl = leaf(bs) if bs is not None else None
    y = F.conv2d(xl, wl, bl, s, p, groups=g)
    dy = plant(torch.randn(*y.shape), [5, y.numel() - 3], [NAN, INF])
    y.backward(dy)
    ins = [xs, ws] + ([bs] if bs is not None else [])

    def window(c):  # groups only where not 1: the older cases' files stay as they were
        c.attr("stride", hw(s)).attr("pad", hw(p))
        return c.attr("groups", g) if g != 1 else c
    groups = f", groups {g}" if g != 1 else ""
    window(NCase(name, "conv2d", f"F.conv2d(stride {s}, pad {p}{groups})")).ins(*ins) \
        .outs(y).write()
    window(NCase(f"{name}_backward_data", "conv2d_backward_data", "autograd dx")) \
        .ins(dy, ws, xs).outs(xl.grad).write()
    c = window(NCase(f"{name}_backward_filter", "conv2d_backward_filter", "autograd dw, db"))
    c.attr("bias", bs is not None).ins(dy, xs, ws)
    c.outs(*([wl.grad] + ([bl.grad] if bs is not None else []))).write()


def hw(v):
    """A window attribute as the case file spells it: 3, or 3,2 for (height, width)."""
    return ",".join(str(i) for i in v) if isinstance(v, tuple) else v


def conv_cases():
    x = conv_input()
    w = torch.randn(4, 3, 3, 3) * 0.3
    b = plant(torch.randn(4), [3], [NAN])
    wn = plant(w, [30], [NAN])  # output channel 1 NaN everywhere
    for args in [("conv2d", x, w, b, 1, 1), ("conv2d_s2", x, w, None, 2, 0),
                 ("conv2d_nan_weight", torch.randn(2, 3, 6, 6), wn, b, 1, 1)]:
        conv_case(*args)


def pool_ceil_cases():
    """ceil_mode pooling: partial last windows (over the odd last rows and columns, which
    hold NaN, inf and -0.0), average pooling's smaller divisor there, and a window that
    would start in the trailing padding dropped (k3 s3 p1 on 8)."""
    for k, s, pad, size in [(2, 2, 0, 7), (3, 2, 0, 8), (3, 2, 1, 8), (3, 3, 1, 8)]:
        x = torch.randn(1, 2, size, size)
        x[0, 0, size - 1, size - 1], x[0, 0, 0, size - 1] = NAN, INF
        x[0, 1, size - 1, 0], x[0, 1, size - 2, size - 1] = -INF, -0.0
        tag = f"k{k}s{s}p{pad}_ceil"
        for kind in ["max", "avg"]:
            op = f"{kind}_pool2d"
            fn = getattr(F, op)
            xl = leaf(x)
            y = fn(xl, k, s, pad, ceil_mode=True)
            dy = plant(torch.randn(*y.shape), [y.numel() - 1], [NAN])
            y.backward(dy)
            for name, o, ins, out in [(f"{op}_{tag}", op, [x], y),
                                      (f"{op}_backward_{tag}", f"{op}_backward", [dy, x],
                                       xl.grad)]:
                c = NCase(name, o, f"F.{op}({k}, {s}, {pad}, ceil_mode=True) on {size}x{size}")
                c.attr("kernel", k).attr("stride", s).attr("pad", pad).attr("ceil_mode", True)
                c.ins(*ins).outs(out)
                if kind == "max":
                    c.attr("_exact", 1)
                c.write()


def nonsquare_window_cases():
    """Windows whose height and width differ: a [3,2] filter with stride (2,1) and padding
    (1,0), a [1,3] grouped one, and [3,2] / [2,1] pools (stride and padding per axis, one
    with ceil_mode) over inputs holding NaN, inf, -0.0 and subnormals."""
    x = torch.randn(2, 4, 7, 6)
    x[0, 0, 1, 1], x[0, 3, 5, 4], x[1, 2, 0, 5], x[1, 1, 2, 2], x[1, 0, 6, 0] = \
        NAN, INF, -INF, SUB, -0.0
    conv_case("conv2d_k3x2_s2x1_p1x0", x, plant(torch.randn(5, 4, 3, 2) * 0.3, [17], [NAN]),
              torch.randn(5), (2, 1), (1, 0))
    conv_case("conv2d_k1x3_grouped_p0x1", x, torch.randn(4, 2, 1, 3) * 0.3, None, 1, (0, 1), 2)
    for k, s, pad, ceil in [((3, 2), (2, 1), (1, 0), False), ((2, 1), (2, 1), (0, 0), False),
                            ((3, 2), (2, 2), (1, 1), True)]:
        tag = "k{}x{}s{}x{}p{}x{}".format(*k, *s, *pad) + ("_ceil" if ceil else "")
        for kind in ["max", "avg"]:
            op = f"{kind}_pool2d"
            fn = getattr(F, op)
            xl = leaf(x)
            y = fn(xl, k, s, pad, ceil_mode=ceil)
            dy = plant(torch.randn(*y.shape), [y.numel() - 1], [NAN])
            y.backward(dy)
            for name, o, ins, out in [(f"{op}_{tag}", op, [x], y),
                                      (f"{op}_backward_{tag}", f"{op}_backward", [dy, x],
                                       xl.grad)]:
                c = NCase(name, o, f"F.{op}({k}, {s}, {pad}, ceil_mode={ceil})")
                c.attr("kernel", hw(k)).attr("stride", hw(s)).attr("pad", hw(pad))
                if ceil:
                    c.attr("ceil_mode", True)
                c.ins(*ins).outs(out)
                if kind == "max":
                    c.attr("_exact", 1)
                c.write()


def more_unary_cases():
    """The unary ops added for ONNX's models (issue 44): forward and autograd's backward in
    f32 and bf16. A backward op that reads the forward output (exp, sqrt, reciprocal) is
    fed y, its expected dx still autograd's from x."""
    x = row_of_specials()
    dy = plant(torch.randn(24), [11, 12, 13, 14], [NAN, INF, -INF, NAN])
    for op, fn, from_output in [
            ("silu", F.silu, False), ("softplus", F.softplus, False),
            ("exp", torch.exp, True), ("log", torch.log, False), ("sqrt", torch.sqrt, True),
            ("reciprocal", torch.reciprocal, True), ("erf", torch.erf, False),
            ("abs", torch.abs, False), ("sign", torch.sign, False),
            ("floor", torch.floor, False), ("ceil", torch.ceil, False)]:
        y = fn(x)
        NCase(op, op, f"{op} of specials").ins(x).outs(y).write()
        NCase(f"{op}_bf16", op, f"{op} of specials in bf16").ins(bf16(x)) \
            .outs(bf16(fn(bf16(x).float()))).attr("_tol", 1e-2).write()
        saved = y if from_output else x
        NCase(f"{op}_backward", f"{op}_backward",
              f"autograd of {op}, fed its {'output' if from_output else 'input'}") \
            .ins(dy, saved).outs(autograd_of(fn)(dy, x)).write()
        xb, dyb = bf16(x), bf16(dy)
        savedb = bf16(fn(xb.float())) if from_output else xb
        NCase(f"{op}_backward_bf16", f"{op}_backward", f"autograd of {op} in bf16") \
            .ins(dyb, savedb).outs(bf16(autograd_of(fn)(dyb.float(), xb.float()))) \
            .attr("_tol", 1e-2).write()
    for name, lo, hi in [("clip", -1.5, 2.0), ("clip_open_max", 0.5, INF),
                         ("clip_crossed", 1.0, -1.0)]:
        fn = lambda v: torch.clamp(v, lo, hi)  # noqa: E731
        NCase(name, "clip", f"torch.clamp(x, {lo}, {hi})").attr("min", lo).attr("max", hi) \
            .ins(x).outs(fn(x)).attr("_exact", 1).write()
        NCase(f"{name}_backward", "clip_backward", f"autograd of torch.clamp(x, {lo}, {hi})") \
            .attr("min", lo).attr("max", hi).ins(dy, x).outs(autograd_of(fn)(dy, x)) \
            .attr("_exact", 1).write()
    NCase("clip_bf16", "clip", "torch.clamp in bf16").attr("min", -1.5).attr("max", 2.0) \
        .ins(bf16(x)).outs(torch.clamp(bf16(x), -1.5, 2.0)).attr("_exact", 1).write()


def pad_cases():
    """pad and pad_backward: constant (a value), reflect and edge (PyTorch's replicate) over
    H and W of [N,C,H,W] holding specials, and a constant pad of every axis; the backward
    autograd's of F.pad (reflect and edge add several outputs into one input)."""
    x = torch.randn(2, 3, 5, 6)
    x[0, 0, 0, 0], x[0, 1, 4, 5], x[1, 2, 2, 3], x[1, 0, 1, 1], x[1, 1, 0, 5] = \
        NAN, INF, -INF, -0.0, SUB
    for name, torch_pad, mode, value, pads in [
            ("pad_constant", (1, 2, 2, 1), "constant", 0.5, [0, 0, 2, 1, 0, 0, 1, 2]),
            ("pad_reflect", (2, 1, 1, 3), "reflect", 0.0, [0, 0, 1, 2, 0, 0, 3, 1]),
            ("pad_edge", (3, 0, 2, 2), "replicate", 0.0, [0, 0, 2, 3, 0, 0, 2, 0]),
            ("pad_constant_every_axis", (1, 1, 0, 2, 1, 0, 2, 1), "constant", -1.0,
             [2, 1, 0, 1, 1, 0, 2, 1])]:
        ours = {"replicate": "edge"}.get(mode, mode)
        fn = lambda v: F.pad(v, torch_pad, mode=mode, value=value) if mode == "constant" \
            else F.pad(v, torch_pad, mode=mode)  # noqa: E731
        xl = leaf(x)
        y = fn(xl)
        dy = plant(torch.randn(*y.shape), [0, y.numel() - 1], [NAN, INF])
        y.backward(dy)
        for case, op, ins, out in [(name, "pad", [x], y),
                                   (f"{name}_backward", "pad_backward", [dy, x], xl.grad)]:
            c = NCase(case, op, f"F.pad(x, {torch_pad}, mode={mode!r}, value={value})")
            c.ints("pads", pads).attr("mode", ours)
            if value != 0.0:
                c.attr("value", value)
            c.ins(*ins).outs(out)
            if op == "pad":
                c.attr("_exact", 1)
            c.write()
    xb = bf16(x)
    NCase("pad_reflect_bf16", "pad", "F.pad reflect in bf16").ints("pads", [0, 0, 1, 2, 0, 0, 3, 1]) \
        .attr("mode", "reflect").ins(xb).outs(bf16(F.pad(xb.float(), (2, 1, 1, 3), mode="reflect"))) \
        .attr("_exact", 1).write()


def select_cases():
    """compare (each kind), where and mod (remainder and fmod) with their backward, under
    broadcasting, over specials: NaN compares unequal to everything; a NaN condition
    selects a (torch.where(cond != 0, ...)), -0 does not; a zero, infinite or negative
    divisor. mod_backward is autograd's gradient of the divisor (b of a's shape, so that
    nothing is summed)."""
    a = special(2, 3, 4)
    b = plant(torch.randn(1, 3, 1), [0, 1, 2], [NAN, 0.0, INF])
    b_eq = a[:, :, :1].clone()[:1]  # equal to a's first column of batch 0
    fns = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}
    for kind, fn in fns.items():
        NCase(f"compare_{kind}", "compare", f"torch.{fn.__name__}(a, b).float(), broadcast") \
            .attr("kind", kind).ins(a, b_eq).outs(fn(a, b_eq).float()).attr("_exact", 1).write()
    NCase("compare_lt_specials", "compare", "a < b with NaN and inf in b") \
        .attr("kind", "lt").ins(a, b).outs((a < b).float()).attr("_exact", 1).write()
    NCase("compare_ge_bf16", "compare", "a >= b in bf16").attr("kind", "ge") \
        .ins(bf16(a), bf16(b)).outs((bf16(a) >= bf16(b)).to(torch.bfloat16)) \
        .attr("_exact", 1).write()
    cond = torch.tensor([1.0, 0.0, NAN, -0.0, 2.0]).reshape(1, 5, 1)
    wa = special(2, 5, 3)
    wb = plant(torch.randn(5, 1), [1], [-INF])
    NCase("where", "where", "torch.where(cond != 0, a, b), the three broadcast") \
        .ins(cond, wa, wb).outs(torch.where(cond != 0, wa, wb)).attr("_exact", 1).write()
    ma = plant(torch.randn(3, 8) * 5, list(range(7)), [NAN, INF, -INF, -0.0, SUB, 7.0, -7.0])
    mb = plant(torch.randn(8) * 2, [0, 1, 2, 5, 6], [1.5, 0.0, INF, 3.5, -3.5])
    for name, fmod, fn in [("mod", 0, torch.remainder), ("mod_fmod", 1, torch.fmod)]:
        NCase(name, "mod", f"torch.{fn.__name__}(a, b), broadcast").attr("fmod", fmod) \
            .ins(ma, mb).outs(fn(ma, mb)).attr("_exact", 1).write()
        bl = leaf(mb.expand(3, 8).contiguous())
        al = leaf(ma)
        y = fn(al, bl)
        dy = plant(torch.randn(3, 8), [9], [INF])
        y.backward(dy)
        NCase(f"{name}_backward", "mod_backward", f"autograd of torch.{fn.__name__} for b") \
            .attr("fmod", fmod).ins(dy, ma, bl.detach()).outs(bl.grad).attr("_exact", 1).write()


def grouped_conv_cases():
    """Grouped (2 groups of 2 input channels, 3 outputs each) and depthwise (4 groups of
    one, stride 2) convolutions over 4 channels: non-finite inputs in every group, a NaN
    tap and a NaN bias in the grouped filter."""
    x = torch.randn(2, 4, 6, 6)
    x[0, 0, 1, 1], x[0, 3, 4, 4], x[1, 2, 0, 5], x[1, 1, 2, 2] = NAN, INF, -INF, SUB
    wg = plant(torch.randn(6, 2, 3, 3) * 0.3, [40], [NAN])
    conv_case("conv2d_grouped", x, wg, plant(torch.randn(6), [4], [NAN]), 1, 1, 2)
    conv_case("conv2d_depthwise_s2", x, torch.randn(4, 1, 3, 3) * 0.3, torch.randn(4), 2, 1, 4)


def conv_bf16_case():
    """bf16 activations beside a bf16-exact f32 filter (a master weight the kernel converts):
    PyTorch's bf16 convolution (oneDNN's, whose bf16 dot products pair channels: an inf
    beside a zero-padded channel gives NaN where the f32 convolution of the same values has
    inf or a finite value; the CPU kernel does as PyTorch does)."""
    x = bf16(conv_input())
    w = bf16(plant(torch.randn(4, 3, 3, 3) * 0.3, [30], [NAN]))
    y = F.conv2d(x, w, None, 1, 1)
    NCase("conv2d_bf16", "conv2d", "F.conv2d in bf16, a NaN weight, zero padding") \
        .attr("stride", 1).attr("pad", 1).ins(x, w.float()).outs(y).attr("_tol", 1e-2).write()


def linear_cases():
    x = special(5, 6)
    w = plant(torch.randn(4, 6), [7], [NAN])
    b = plant(torch.randn(4), [2], [-INF])
    xl, wl, bl = leaf(x), leaf(w), leaf(b)
    y = F.linear(xl, wl, bl)
    dy = plant(torch.randn(5, 4), [1, 9], [INF, NAN])
    y.backward(dy)
    NCase("linear", "linear", "F.linear").ins(x, w, b).outs(y).write()
    xl2, wl2 = leaf(x), leaf(torch.randn(4, 6))
    y2 = F.linear(xl2, wl2)
    NCase("linear_nobias", "linear", "F.linear without bias").ins(x, wl2).outs(y2).write()
    NCase("linear_backward_data", "linear_backward_data", "dy @ w").ins(dy, w).outs(xl.grad) \
        .write()
    NCase("linear_backward_weight", "linear_backward_weight", "dy^T @ x and dy's column sums") \
        .attr("bias", True).ins(dy, x).outs(wl.grad, bl.grad).write()
    a = special(2, 3, 4)
    bm = plant(torch.randn(2, 5, 4), [3], [INF])
    NCase("matmul", "matmul", "torch.matmul(a, b^T) batched").attr("trans_b", True) \
        .ins(a, bm).outs(torch.matmul(a, bm.transpose(-1, -2))).write()
    at = plant(torch.randn(4, 3), [0, 5], [-0.0, NAN])
    bb = special(2, 4, 5)
    NCase("matmul_trans_a", "matmul", "torch.matmul(a^T, b), a shared matrix") \
        .attr("trans_a", True).ins(at, bb).outs(torch.matmul(at.t(), bb)).write()


def norm_input():
    """[3, 4, 2, 3]: channel 0 holds a NaN, channel 1 +inf, channel 2 -0.0 and subnormals,
    channel 3 ordinary."""
    x = torch.randn(3, 4, 2, 3)
    x[1, 0, 1, 1] = NAN
    x[2, 1, 0, 2] = INF
    x[0, 2, 0, 0], x[1, 2, 1, 2], x[2, 2, 1, 0] = -0.0, SUB, -SUB
    return x


def batch_norm_cases():
    x = norm_input()
    gamma = torch.randn(4).abs() + 0.5
    beta = torch.randn(4)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    eps, mom = 1e-5, 0.1
    rm2, rv2 = rm.clone(), rv.clone()
    y, save_mean, save_invstd = torch.native_batch_norm(x, gamma, beta, rm2, rv2, True, mom, eps)
    c = NCase("batch_norm_training", "batch_norm", "torch.native_batch_norm(training): a channel "
              "with a NaN or inf is NaN, and so are its statistics")
    c.attr("training", True).attr("momentum", mom).attr("eps", eps)
    c.var(3, "rm", "buffer").var(4, "rv", "buffer")
    c.ins(x, gamma, beta, rm, rv).outs(y, save_mean, save_invstd)
    c.tensor("after3", rm2).tensor("after4", rv2).write()
    xb = bf16(x).float()
    rm3, rv3 = rm.clone(), rv.clone()
    yb, mb, ib = torch.native_batch_norm(xb, gamma, beta, rm3, rv3, True, mom, eps)
    c = NCase("batch_norm_training_bf16", "batch_norm", "native_batch_norm of bf16 values")
    c.attr("training", True).attr("momentum", mom).attr("eps", eps).attr("_tol", 1e-2)
    c.var(3, "rm", "buffer").var(4, "rv", "buffer")
    c.ins(bf16(x), gamma, beta, rm, rv).outs(bf16(yb), mb, ib)
    c.tensor("after3", rm3).tensor("after4", rv3).write()
    rmi = plant(rm, [1], [INF])
    rvi = plant(rv, [2], [-1.0])  # a negative variance: sqrt gives NaN
    yi = F.batch_norm(x, rmi, rvi, gamma, beta, False, mom, eps)
    c = NCase("batch_norm_inference", "batch_norm", "F.batch_norm(training=False)")
    c.attr("training", False).attr("momentum", mom).attr("eps", eps)
    c.ins(x, gamma, beta, rmi, rvi).outs(yi).write()
    dy = plant(torch.randn(*x.shape), [23 + 24], [NAN])  # in channel 3
    dx, dgamma, dbeta = torch.ops.aten.native_batch_norm_backward(
        dy, x, gamma, rm, rv, save_mean, save_invstd, True, eps, [True, True, True])
    NCase("batch_norm_backward", "batch_norm_backward", "aten native_batch_norm_backward") \
        .attr("eps", eps).ins(dy, x, gamma, save_mean, save_invstd).outs(dx, dgamma, dbeta).write()
    return x, gamma, beta, rm, rv, eps, mom


def layer_norm_cases():
    x = torch.randn(5, 6)
    x[0, 2] = NAN
    x[1, 4] = INF
    x[2, 0], x[2, 3], x[2, 5] = -0.0, SUB, -INF
    x[3, 1] = -SUB
    gamma, beta = torch.randn(6), torch.randn(6)
    eps = 1e-5
    xl, gl, bl = leaf(x), leaf(gamma), leaf(beta)
    y = F.layer_norm(xl, (6,), gl, bl, eps)
    mean, var = x.mean(-1), x.var(-1, unbiased=False)
    NCase("layer_norm", "layer_norm", "F.layer_norm: a row with a NaN or inf is NaN") \
        .attr("eps", eps).ins(x, gamma, beta).outs(y, mean, var).write()
    xb = bf16(x).float()
    NCase("layer_norm_bf16", "layer_norm", "F.layer_norm of bf16 values, y rounded once") \
        .attr("eps", eps).ins(bf16(x), gamma, beta) \
        .outs(bf16(F.layer_norm(xb, (6,), gamma, beta, eps)), xb.mean(-1),
              xb.var(-1, unbiased=False)).attr("_tol", 1e-2).write()
    dy = plant(torch.randn(5, 6), [25], [NAN])  # row 4
    y.backward(dy)
    NCase("layer_norm_backward", "layer_norm_backward", "autograd of F.layer_norm") \
        .attr("eps", eps).ins(dy, x, mean, var, gamma).outs(xl.grad, gl.grad, bl.grad).write()


def embedding_cases():
    table = torch.randn(5, 3)
    table[1, 0], table[2, 1], table[3, 2], table[4, 0] = NAN, INF, -0.0, SUB
    ids = torch.tensor([[1, 0, 2], [4, 1, 3]], dtype=torch.int32)
    tl = leaf(table)
    y = F.embedding(ids.long(), tl)
    dy = plant(torch.randn(2, 3, 3), [0, 4, 10], [INF, -INF, NAN])  # ids 1 and 0, then 1
    y.backward(dy)
    NCase("embedding", "embedding", "F.embedding: rows copied").ins(ids, table).outs(y) \
        .attr("_exact", 1).write()
    NCase("embedding_backward", "embedding_backward", "autograd: dy rows added by id") \
        .attr("vocab", 5).ins(dy, ids).outs(tl.grad).write()


def loss_logits():
    """Rows: NaN, +inf, -inf at the label, -inf elsewhere, -0.0/subnormal, ordinary, and a
    padding row (label -1)."""
    x = torch.randn(7, 4)
    x[0, 1] = NAN
    x[1, 2] = INF
    x[2, 0] = -INF
    x[3, 3] = -INF
    x[4, 0], x[4, 1] = -0.0, SUB
    labels = torch.tensor([0, 1, 0, 2, 1, 3, -1], dtype=torch.int32)
    return x, labels


def loss_cases():
    x, labels = loss_logits()
    for name, red, div, eps in [("sum", "sum", 1, 0.0), ("mean_smoothed", "mean", 8, 0.1)]:
        xl = leaf(x)
        loss = F.cross_entropy(xl, labels.long(), ignore_index=-1, reduction="sum",
                               label_smoothing=eps) / div
        dloss = torch.tensor(0.75)
        loss.backward(dloss)
        c = NCase(f"softmax_cross_entropy_{name}", "softmax_cross_entropy",
                  "F.cross_entropy(ignore_index=-1, reduction=sum) / divisor")
        c.attr("reduction", red).attr("divisor", div).attr("label_smoothing", eps)
        c.ins(x, labels).outs(loss).write()
        c = NCase(f"softmax_cross_entropy_backward_{name}", "softmax_cross_entropy_backward",
                  "autograd of the loss: a row with a NaN or +inf logit is NaN")
        c.attr("reduction", red).attr("divisor", div).attr("label_smoothing", eps)
        c.ins(x, labels, dloss).outs(xl.grad).write()
    # A NaN row alone makes the loss NaN; the others keep theirs (an inf logit at the label
    # of a -inf row makes +inf).
    for name, rows in [("nan_row", [0, 5, 6]), ("neg_inf_label", [2, 3, 5])]:
        xs, ls = x[rows], labels[rows]
        loss = F.cross_entropy(xs, ls.long(), ignore_index=-1, reduction="sum")
        c = NCase(f"softmax_cross_entropy_{name}", "softmax_cross_entropy", "one special row")
        c.attr("reduction", "sum").attr("divisor", 1).ins(xs, ls).outs(loss).write()
    # argmax takes NaN as the largest (the first NaN); accuracy counts argmax == label.
    xa = torch.tensor([[1.0, NAN, 3.0, NAN], [1.0, NAN, 3.0, 2.0], [-INF, -INF, -INF, -INF],
                       [1.0, INF, INF, 0.0], [-0.0, 0.0, -SUB, SUB], [2.0, 1.0, 0.0, -1.0],
                       [NAN, 5.0, 1.0, 0.0]])
    la = torch.tensor([1, 2, 0, 1, 3, 0, 0], dtype=torch.int32)
    correct = ((xa.argmax(1) == la.long()) & (la >= 0)).sum().to(torch.int32)
    NCase("accuracy", "accuracy", "(argmax == label).sum(); argmax takes the first NaN") \
        .ins(xa, la).outs(correct.reshape(())).write()
    la2 = torch.tensor([3, 1, 1, 2, 0, 0, -1], dtype=torch.int32)
    correct2 = ((xa.argmax(1) == la2.long()) & (la2 >= 0)).sum().to(torch.int32)
    NCase("accuracy_misses", "accuracy", "labels that miss the NaN and the later ties") \
        .ins(xa, la2).outs(correct2.reshape(())).write()


# --- fused conv / batch norm / relu -------------------------------------------------------
def stats_of(y):
    """conv2d_stats' f64[3, C]: count, sum, m * var + m * mean^2 (var biased, two passes)."""
    yd = y.detach().double()
    m = float(yd.numel() // yd.shape[1])
    s = yd.sum((0, 2, 3))
    mean = s / m
    var = ((yd - mean.view(1, -1, 1, 1)) ** 2).mean((0, 2, 3))
    return torch.stack([torch.full_like(s, m), s, m * var + m * mean * mean])


def fused_cases(x_bn, gamma, beta, rm, rv, eps, mom):
    x = conv_input()
    w = torch.randn(4, 3, 3, 3) * 0.3
    b = torch.randn(4)
    y = F.conv2d(x, w, b, 1, 1)
    NCase("conv2d_stats", "conv2d_stats", "F.conv2d and its per-channel statistics in double") \
        .attr("stride", 1).attr("pad", 1).ins(x, w, b).outs(y, stats_of(y)).write()
    residual = plant(torch.randn(2, 4, 6, 6), [5, 77], [NAN, -INF])
    for relu in (False, True):
        xl = leaf(x)
        z = F.conv2d(xl, w, b, 1, 1) + residual
        out = F.relu(z) if relu else z
        NCase(f"conv2d_bias_act{'_relu' if relu else ''}", "conv2d_bias_act",
              "F.conv2d + residual, then relu").attr("stride", 1).attr("pad", 1) \
            .attr("relu", relu).ins(x, w, b, residual).outs(out).write()
    xr = plant(torch.randn(2, 3, 6, 6), [0, 50, 100], [-INF, -0.0, SUB])
    yr = F.conv2d(xr, w, b, 1, 1)
    NCase("conv2d_bias_act_norelu_noresidual", "conv2d_bias_act", "F.conv2d with bias") \
        .attr("stride", 1).attr("pad", 1).attr("relu", False).ins(xr, w, b).outs(yr).write()
    NCase("conv2d_bias_act_relu_only", "conv2d_bias_act", "F.relu(F.conv2d)") \
        .attr("stride", 1).attr("pad", 1).attr("relu", True).ins(xr, w, b).outs(F.relu(yr)) \
        .write()

    # batch norm over the special input from its statistics: y = x_bn.
    yb = x_bn
    stats = stats_of(yb)
    res = plant(torch.randn(*yb.shape), [3 * 6 + 1], [NAN])  # channel 3 of image 0
    for relu, with_res in [(True, True), (False, False), (True, False)]:
        rm2, rv2 = rm.clone(), rv.clone()
        bn, save_mean, save_invstd = torch.native_batch_norm(yb, gamma, beta, rm2, rv2, True,
                                                             mom, eps)
        z = bn + res if with_res else bn
        out = F.relu(z) if relu else z
        tag = ("_relu" if relu else "") + ("_residual" if with_res else "")
        c = NCase(f"batch_norm_apply{tag}", "batch_norm_apply",
                  "torch.native_batch_norm (training) + residual, relu")
        c.attr("momentum", mom).attr("eps", eps).attr("relu", relu)
        c.var(4, "rm", "buffer").var(5, "rv", "buffer")
        c.ins(*([yb, stats, gamma, beta, rm, rv] + ([res] if with_res else [])))
        c.outs(out, save_mean, save_invstd).tensor("after4", rm2).tensor("after5", rv2).write()
        if not with_res:
            c = NCase(f"batch_norm_recompute{tag}", "batch_norm_recompute",
                      "batch_norm_apply's output again")
            c.attr("eps", eps).attr("relu", relu).ins(yb, stats, gamma, beta).outs(out).write()

    # Backward of relu(batch_norm(y) + residual) from PyTorch's autograd.
    for relu, with_res in [(True, True), (False, False)]:
        yl, gl, bl = leaf(yb), leaf(gamma), leaf(beta)
        bn, save_mean, save_invstd = torch.native_batch_norm(yl, gl, bl, rm.clone(), rv.clone(),
                                                             True, mom, eps)
        z = bn + res if with_res else bn
        out = F.relu(z) if relu else z
        dout = plant(torch.randn(*yb.shape), [3 * 6 * 2 + 3 * 6 + 2], [INF])  # channel 3
        zl = z.detach().requires_grad_()
        (F.relu(zl) if relu else zl).backward(dout)
        dz = zl.grad
        out.backward(dout)
        yd = yb.double()
        sums = torch.stack([dz.double().sum((0, 2, 3)),
                            (dz.double() * (yd - save_mean.double().view(1, -1, 1, 1)))
                            .sum((0, 2, 3))])
        tag = ("_relu" if relu else "") + ("_residual" if with_res else "")
        ins = [dout, yb, save_mean.detach(), save_invstd.detach()] + ([out.detach()] if relu
                                                                       else [])
        NCase(f"batch_norm_backward_reduce{tag}", "batch_norm_backward_reduce",
              "the sums of batch norm's backward, dbeta and dgamma (autograd)") \
            .ins(*ins).outs(sums, bl.grad, gl.grad).write()
        ins = [dout, yb, gamma, save_mean.detach(), save_invstd.detach(), sums, stats] + \
            ([out.detach()] if relu else [])
        outs = [yl.grad] + ([dz] if with_res else [])
        NCase(f"batch_norm_backward_apply{tag}", "batch_norm_backward_apply",
              "autograd dy (and the residual's gradient dz)").attr("residual", with_res) \
            .ins(*ins).outs(*outs).write()

    wf = plant(torch.randn(4, 3, 3, 3), [0, 40], [INF, NAN])
    bf = plant(torch.randn(4), [3], [-0.0])
    g2 = plant(gamma, [2], [NAN])
    rm3 = plant(rm, [3], [INF])
    rv3 = plant(rv, [0], [-1.0])
    from torch.nn.utils.fusion import fuse_conv_bn_weights
    wo, bo = fuse_conv_bn_weights(wf, bf, rm3, rv3, eps, g2, beta)
    NCase("fold_batch_norm", "fold_batch_norm", "torch.nn.utils.fusion.fuse_conv_bn_weights") \
        .attr("eps", eps).ins(wf, bf, g2, beta, rm3, rv3).outs(wo, bo).write()
    wo2, bo2 = fuse_conv_bn_weights(wf, None, rm3, rv3, eps, g2, beta)
    NCase("fold_batch_norm_nobias", "fold_batch_norm", "fuse_conv_bn_weights without a bias") \
        .attr("eps", eps).ins(wf, g2, beta, rm3, rv3).outs(wo2, bo2).write()


# --- optimizer updates --------------------------------------------------------------------
def opt_tensors():
    """w, g and the moments m, v of 12 values: each special in each operand somewhere."""
    w = plant(torch.randn(12), [0, 3, 6, 9], [INF, -0.0, SUB, 1.0])
    g = plant(torch.randn(12), [1, 4, 7, 10], [NAN, -INF, -0.0, SUB])
    m = plant(torch.randn(12) * 0.1, [2, 5], [NAN, INF])
    v = plant(torch.rand(12) * 0.1, [8, 11], [INF, 0.0])
    return w, g, m, v


def opt_tensors_small():
    """A second parameter of 7 values, its gradient holding an inf."""
    return (torch.randn(7), plant(torch.randn(7), [3], [INF]), torch.randn(7) * 0.1,
            torch.rand(7) * 0.1)


def sgd_step(w, g, m, lr, momentum, wd):
    p = torch.nn.Parameter(w.clone())
    p.grad = g.clone()
    opt = torch.optim.SGD([p], lr=lr, momentum=momentum, weight_decay=wd, foreach=False)
    if momentum > 0:
        opt.state[p]["momentum_buffer"] = m.clone()
    opt.step()
    return p.detach(), (opt.state[p]["momentum_buffer"] if momentum > 0 else None)


def adamw_step(w, g, m, v, step, lr, b1, b2, eps, wd):
    p = torch.nn.Parameter(w.clone())
    p.grad = g.clone()
    opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    opt.state[p]["step"] = torch.tensor(float(step))
    opt.state[p]["exp_avg"] = m.clone()
    opt.state[p]["exp_avg_sq"] = v.clone()
    opt.step()
    s = opt.state[p]
    return p.detach(), s["exp_avg"], s["exp_avg_sq"], s["step"].reshape(1)


def optimizer_cases():
    lr, mom, wd = 0.1, 0.9, 0.01
    w, g, m, v = opt_tensors()
    w2, g2, m2, v2 = opt_tensors_small()
    factor = torch.tensor([0.5])
    # sgd_update: w, g, m?, lr_scale?
    wn, mn = sgd_step(w, g, m, lr * 0.5, mom, wd)
    c = NCase("sgd_update", "sgd_update", "torch.optim.SGD(momentum, weight_decay).step() from "
              "a given momentum buffer, lr times the schedule's factor")
    c.attr("lr", lr).attr("momentum", mom).attr("weight_decay", wd)
    c.var(0, "w", "param").var(2, "w.momentum", "optimizer").var(3, "lr_scale", "fed")
    c.ins(w, g, m, factor).tensor("after0", wn).tensor("after2", mn).write()
    wn0, _ = sgd_step(w, g, None, lr, 0.0, 0.0)
    c = NCase("sgd_update_plain", "sgd_update", "torch.optim.SGD(lr).step()")
    c.attr("lr", lr).attr("momentum", 0.0).attr("weight_decay", 0.0).var(0, "w", "param")
    c.ins(w, g).tensor("after0", wn0).write()
    c = NCase("sgd_update_bf16_grad", "sgd_update", "SGD from a bf16 gradient (read exactly)")
    c.attr("lr", lr).attr("momentum", 0.0).attr("weight_decay", wd).var(0, "w", "param")
    c.ins(w, bf16(g)).tensor("after0", sgd_step(w, bf16(g).float(), None, lr, 0.0, wd)[0]).write()
    # sgd_update_group: ws, gs, ms
    wa, ma = sgd_step(w, g, m, lr, mom, wd)
    wb, mb = sgd_step(w2, g2, m2, lr, mom, wd)
    c = NCase("sgd_update_group", "sgd_update_group", "two SGD steps in one node")
    c.attr("lr", lr).attr("momentum", mom).attr("weight_decay", wd)
    c.var(0, "w", "param").var(1, "w2", "param").var(4, "w.momentum", "optimizer")
    c.var(5, "w2.momentum", "optimizer")
    c.ins(w, w2, g, g2, m, m2).tensor("after0", wa).tensor("after1", wb)
    c.tensor("after4", ma).tensor("after5", mb).write()
    # sgd_update_shard: w (a value), g, m -> y
    c = NCase("sgd_update_shard", "sgd_update_shard", "SGD over a flat shard")
    c.attr("lr", lr).attr("momentum", mom).attr("weight_decay", wd)
    c.var(2, "shard.momentum", "optimizer")
    c.ins(w, g, m).outs(wa).tensor("after2", ma).write()

    b1, b2, eps, awd = 0.9, 0.999, 1e-8, 0.01
    step = 3.0
    args = (lr, b1, b2, eps, awd)
    aw, am, av, astep = adamw_step(w, g, m, v, step, *args)
    c = NCase("adamw_update", "adamw_update",
              "torch.optim.AdamW.step() from given moments and step count")
    c.attr("lr", lr).attr("beta1", b1).attr("beta2", b2).attr("eps", eps).attr("weight_decay", awd)
    c.var(0, "w", "param").var(2, "w.exp_avg", "optimizer").var(3, "w.exp_avg_sq", "optimizer")
    c.var(4, "w.step", "optimizer")
    c.ins(w, g, m, v, torch.tensor([step]))
    c.tensor("after0", aw).tensor("after2", am).tensor("after3", av).tensor("after4", astep)
    c.attr("_tol", 2e-5).write()
    aw2, am2, av2, astep2 = adamw_step(w2, g2, m2, v2, 0.0, *args)
    c = NCase("adamw_update_group", "adamw_update_group", "two AdamW steps in one node")
    c.attr("lr", lr).attr("beta1", b1).attr("beta2", b2).attr("eps", eps).attr("weight_decay", awd)
    c.var(0, "w", "param").var(1, "w2", "param")
    for i, nm in [(4, "w.exp_avg"), (5, "w2.exp_avg"), (6, "w.exp_avg_sq"), (7, "w2.exp_avg_sq"),
                  (8, "w.step"), (9, "w2.step")]:
        c.var(i, nm, "optimizer")
    c.ins(w, w2, g, g2, m, m2, v, v2, torch.tensor([step]), torch.tensor([0.0]))
    for i, t in [(0, aw), (1, aw2), (4, am), (5, am2), (6, av), (7, av2), (8, astep),
                 (9, astep2)]:
        c.tensor(f"after{i}", t)
    c.attr("_tol", 2e-5).write()
    sw, sm_, sv, sstep = adamw_step(w, g, m, v, step, lr * 0.5, b1, b2, eps, awd)
    c = NCase("adamw_update_shard", "adamw_update_shard", "AdamW over a flat shard, scheduled lr")
    c.attr("lr", lr).attr("beta1", b1).attr("beta2", b2).attr("eps", eps).attr("weight_decay", awd)
    c.var(2, "s.exp_avg", "optimizer").var(3, "s.exp_avg_sq", "optimizer")
    c.var(4, "s.step", "optimizer").var(5, "lr_scale", "fed")
    c.ins(w, g, m, v, torch.tensor([step]), factor).outs(sw)
    c.tensor("after2", sm_).tensor("after3", sv).tensor("after4", sstep).attr("_tol", 2e-5).write()


def clip(gs, max_norm):
    ps = [torch.nn.Parameter(torch.zeros_like(g, dtype=torch.float32)) for g in gs]
    for p, g in zip(ps, gs):
        p.grad = g.float().clone()
    torch.nn.utils.clip_grad_norm_(ps, max_norm)
    return [p.grad for p in ps]


def clip_cases():
    """PyTorch 1.13's clip_grad_norm_ (error_if_nonfinite=False): a NaN anywhere makes the
    norm NaN, and clamp(max_norm / (NaN + 1e-6), max=1) = NaN multiplies every gradient; an
    inf makes the factor 0: finite gradients become (signed) zeros, infinite ones NaN."""
    base = [torch.randn(6) * 2, torch.randn(2, 3)]
    for name, at, vals in [("nan", [(1, 4)], [NAN]), ("inf", [(0, 2)], [-INF]),
                           ("tiny", [(0, 1), (1, 0)], [-0.0, SUB]), ("unclipped", [], [])]:
        gs = [g.clone() for g in base]
        for (k, i), v in zip(at, vals):
            gs[k].view(-1)[i] = v
        max_norm = 100.0 if name == "unclipped" else 1.0
        NCase(f"clip_grad_norm_{name}", "clip_grad_norm", "torch.nn.utils.clip_grad_norm_") \
            .attr("max_norm", max_norm).ins(*gs).outs(*clip(gs, max_norm)).write()
    gs = [bf16(base[0]), base[1].clone()]
    gs[1].view(-1)[3] = NAN
    NCase("clip_grad_norm_bf16", "clip_grad_norm", "a bf16 and an f32 gradient, one NaN") \
        .attr("max_norm", 1.0).ins(*gs).outs(bf16(clip(gs, 1.0)[0]), clip(gs, 1.0)[1]) \
        .attr("_tol", 1e-2).write()


def pointwise_loss_cases():
    """mse_loss, l1_loss, smooth_l1_loss and bce_with_logits (issue 42): the forward sums
    with the infinities and signed zeros (and alone with a NaN), the backward per element
    with every special value; a difference of zero (x = target) where L1's and smooth L1's
    gradients take PyTorch's branches."""
    x = torch.randn(3, 4)
    for i, v in enumerate(SPECIALS):
        x.view(-1)[i] = v
    t = torch.randn(3, 4)
    t.view(-1)[6:8] = x.view(-1)[6:8]  # d = 0
    t.view(-1)[3] = 0.0  # x = -0.0 against +0: d = -0.0
    tb = torch.rand(3, 4)
    tb.view(-1)[6:9] = torch.tensor([0.0, 1.0, 1.0])
    pos_weight = torch.rand(4) * 3
    no_nan = x.clone()
    no_nan.view(-1)[0] = 1.5
    ops = [
        ("mse_loss", {}, lambda a, b: F.mse_loss(a, b, reduction="sum"), t),
        ("l1_loss", {}, lambda a, b: F.l1_loss(a, b, reduction="sum"), t),
        ("smooth_l1_loss", {"beta": 1.0},
         lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=1.0), t),
        ("smooth_l1_loss", {"beta": 0.0},
         lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.0), t),
        ("bce_with_logits", {}, lambda a, b: F.binary_cross_entropy_with_logits(
            a, b, reduction="sum"), tb),
        ("bce_with_logits", {"pos_weight": pos_weight},
         lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="sum",
                                                         pos_weight=pos_weight), tb),
    ]
    dloss = torch.tensor(0.75)
    for op, extra, fn, target in ops:
        tag = op + ("_beta0" if extra.get("beta") == 0.0 else "") + \
            ("_pos_weight" if "pos_weight" in extra else "")
        pw = [extra["pos_weight"]] if "pos_weight" in extra else []
        for name, xs in [("inf", no_nan), ("nan", x)]:
            c = NCase(f"{tag}_{name}", op, f"F.{op}(reduction=sum)")
            c.attr("reduction", "sum").attr("divisor", 1)
            if "beta" in extra:
                c.attr("beta", extra["beta"])
            c.ins(xs, target, *pw).outs(fn(xs, target)).write()
        xl = leaf(x)
        loss = fn(xl, target) / x.numel()
        loss.backward(dloss)
        c = NCase(f"{tag}_backward", op + "_backward", "autograd of the mean, element by element")
        c.attr("reduction", "mean").attr("divisor", x.numel())
        if "beta" in extra:
            c.attr("beta", extra["beta"])
        c.ins(x, target, dloss, *pw).outs(xl.grad).write()


def target_weight_sum_cases():
    """The counted targets' class weights summed: a NaN or inf weight counts only where a
    counted label picks it."""
    labels = torch.tensor([[0, 1, 2], [-1, 1, 3]], dtype=torch.int32)
    for name, weight in [("inf", torch.tensor([INF, -0.0, SUB, 2.0])),
                         ("nan_unpicked", torch.tensor([1.5, 0.5, 2.0, NAN])),
                         ("nan_picked", torch.tensor([NAN, 0.5, 2.0, 1.0]))]:
        counted = labels[(labels >= 0) & (labels != 3)].long()
        total = weight[counted].double().sum().float()
        NCase(f"target_weight_sum_{name}", "target_weight_sum",
              "weight[labels that count].sum(), ignore_index=3") \
            .attr("ignore_index", 3).ins(labels, weight).outs(total).write()


# --- fused attention --------------------------------------------------------------------
def attention_reference(q, k, v, heads, scale, causal, position=None):
    """y [N, Tq, H*dv] and lse [N, H, Tq] of attention's definition (module docstring):
    query i of a causal op (or the cached one at `position`) sees keys 0..i only."""
    n, tq, _ = q.shape
    d, dv = q.shape[2] // heads, v.shape[2] // heads
    ys, lses = [], []
    for b in range(n):
        yb, lb = [], []
        for h in range(heads):
            qh, kh, vh = q[b, :, h * d:(h + 1) * d], k[b, :, h * d:(h + 1) * d], \
                v[b, :, h * dv:(h + 1) * dv]
            rows, lrow = [], []
            for i in range(tq):
                seen = position + 1 if position is not None else (i + 1 if causal else k.shape[1])
                s_ = (qh[i] @ kh[:seen].T) * scale
                m = s_.max()
                lrow.append(m + torch.log(torch.exp(s_ - m).sum()))
                rows.append(F.softmax(s_, -1) @ vh[:seen])
            yb.append(torch.stack(rows))
            lb.append(torch.stack(lrow))
        ys.append(torch.cat(yb, -1))
        lses.append(torch.stack(lb))
    return torch.stack(ys), torch.stack(lses)


def attention_cases():
    heads, d, n, t = 2, 3, 2, 5
    scale = d ** -0.5
    q, k, v = (torch.randn(n, t, heads * d) for _ in range(3))
    # q: a NaN (batch 0, query 1, head 0: that row NaN), -0.0 and a subnormal (ordinary);
    # k: +inf in batch 1, key 2, head 1 (the queries that see it get +-inf scores: NaN rows
    # where +inf, a zero probability where -inf); v: -0.0, a subnormal and +inf at key 0 of
    # head 0 in batch 1 (seen by every query) and NaN at the last key of head 1 in batch 0
    # (a causal op's earlier queries do not see it).
    q[0, 1, 1], q[0, 3, 4], q[1, 4, 0] = NAN, -0.0, SUB
    k[1, 2, 4] = INF
    v[1, 0, 1], v[1, 3, 2], v[1, 0, 0], v[0, 4, 5] = -0.0, SUB, INF, NAN
    for causal in (False, True):
        y, lse = attention_reference(q, k, v, heads, scale, causal)
        name = "attention_causal" if causal else "attention"
        NCase(name, "attention", f"attention's definition{', causal' if causal else ''}: "
              "NaN and +-inf scores, specials in v") \
            .attr("heads", heads).attr("scale", scale).attr("causal", causal) \
            .ins(q, k, v).outs(y, lse).write()
    # Every score of a row -inf (a key of -inf meeting positive q): softmax's NaN row.
    qa = torch.rand(1, 2, heads * d) + 0.5
    ka = torch.randn(1, 3, heads * d)
    ka[0, :, 0] = -INF
    va = torch.randn(1, 3, heads * d)
    y, lse = attention_reference(qa, ka, va, heads, scale, False)
    NCase("attention_all_minus_inf", "attention", "a row whose every score is -inf: NaN") \
        .attr("heads", heads).attr("scale", scale).ins(qa, ka, va).outs(y, lse).write()

    # The backward: autograd of the definition from finite q, k, v (but a NaN in q) and
    # specials in dy; y and lse as the forward gives them.
    qb, kb, vb = (torch.randn(n, t, heads * d) for _ in range(3))
    qb[1, 2, 3] = NAN
    dy = torch.randn(n, t, heads * d)
    dy[0, 0, 0], dy[0, 3, 4], dy[1, 1, 2], dy[0, 2, 1] = NAN, -0.0, SUB, -SUB
    for causal in (False, True):
        ql, kl, vl = leaf(qb), leaf(kb), leaf(vb)
        y, lse = attention_reference(ql, kl, vl, heads, scale, causal)
        y.backward(dy)
        name = "attention_backward_causal" if causal else "attention_backward"
        NCase(name, "attention_backward", "autograd of attention's definition: NaN in dy and q, "
              "-0.0 and subnormals in dy") \
            .attr("heads", heads).attr("scale", scale).attr("causal", causal) \
            .ins(dy, qb, kb, vb, y, lse).outs(ql.grad, kl.grad, vl.grad).write()

    # The cached op: one query at position 2 over a cache of 5; specials after the position
    # are not read (a NaN there changes nothing), those before are.
    qc = torch.randn(n, 1, heads * d)
    kc, vc = torch.randn(n, t, heads * d), torch.randn(n, t, heads * d)
    kc[0, 3, 0], vc[1, 4, 2] = NAN, INF          # beyond the position: not read
    kc[1, 1, 5], vc[0, 0, 3], vc[0, 2, 1] = INF, NAN, -0.0   # read
    qc[1, 0, 2] = SUB
    y, _ = attention_reference(qc, kc, vc, heads, scale, False, position=2)
    NCase("attention_cached", "attention_cached", "one query over keys 0..2 of a cache; "
          "specials beyond it not read") \
        .attr("heads", heads).attr("scale", scale) \
        .ins(qc, kc, vc, torch.tensor([2, 2], dtype=torch.int32)).outs(y).write()


def relu_mask(y):
    """conv2d_relu_avg_pool's mask of y [N, C, H, W] (W <= 32): bit j of row (n, c, i) set
    where y[n, c, i, j] is > 0 or NaN (not <= 0: where relu's backward passes), an i32."""
    bits = torch.zeros(*y.shape[:3], dtype=torch.int64)
    for j in range(y.shape[3]):
        bits |= (~(y[..., j] <= 0)).long() << j
    return ((bits + 2**31) % 2**32 - 2**31).to(torch.int32)


def conv_relu_pool_cases():
    """conv2d_relu_avg_pool and its filter gradient (fuse-conv-relu-pool's pair) as the ops
    they stand for: F.avg_pool2d(F.relu(F.conv2d(x, w, b)), 2) and relu's mask of the
    convolution's output, and autograd's dw and db from a pooled gradient holding NaN and
    inf. LeNet's first layer's kind (one channel, 3x3: 9 products, a NaN bias) and 8
    products over two channels whose convolution has an odd row and column (that no window
    reads: no gradient through them)."""
    for name, x, w, b in [
            ("conv2d_relu_avg_pool", special(2, 1, 10, 10), torch.randn(4, 1, 3, 3) * 0.3,
             plant(torch.randn(4), [2], [NAN])),
            ("conv2d_relu_avg_pool_odd", special(2, 2, 8, 9), torch.randn(3, 2, 2, 2) * 0.3,
             None)]:
        xl, wl = leaf(x), leaf(w)
        bl = leaf(b) if b is not None else None
        conv = F.conv2d(xl, wl, bl)
        y = F.avg_pool2d(F.relu(conv), 2)
        dy = plant(torch.randn(*y.shape), [3, y.numel() - 2], [NAN, INF])
        y.backward(dy)
        mask = relu_mask(conv.detach())
        ins = [x, w] + ([b] if b is not None else [])
        NCase(name, "conv2d_relu_avg_pool", "F.avg_pool2d(F.relu(F.conv2d), 2), relu's mask") \
            .attr("stride", 1).attr("pad", 0).ins(*ins).outs(y, mask).write()
        NCase(f"{name}_backward_filter", "conv2d_relu_avg_pool_backward_filter",
              "autograd dw, db of F.avg_pool2d(F.relu(F.conv2d), 2)") \
            .attr("stride", 1).attr("pad", 0).attr("bias", b is not None) \
            .ins(dy, x, w, mask).outs(*([wl.grad] + ([bl.grad] if b is not None else []))) \
            .write()


def main():
    if not torch.__version__.startswith("1.13"):
        sys.exit(f"gen_nonfinite_refs.py: wants PyTorch 1.13 (run /usr/bin/python3), "
                 f"found {torch.__version__}")
    torch.manual_seed(20260401)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".ref"):
            os.remove(os.path.join(OUT, f))
    unary_cases()
    binary_cases()
    dropout_case()
    softmax_cases()
    reduce_cases()
    movement_cases()
    pool_cases()
    conv_cases()
    conv_bf16_case()
    linear_cases()
    bn = batch_norm_cases()
    layer_norm_cases()
    embedding_cases()
    loss_cases()
    fused_cases(*bn)
    optimizer_cases()
    clip_cases()
    pointwise_loss_cases()
    target_weight_sum_cases()
    attention_cases()
    # Cases added since come last, so that the earlier ones keep their random draws.
    grouped_conv_cases()
    pool_ceil_cases()
    nonsquare_window_cases()
    more_unary_cases()
    pad_cases()
    select_cases()
    conv_relu_pool_cases()
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}")


if __name__ == "__main__":
    main()
