#!/usr/bin/python3
"""Writes the PyTorch reference cases of scale, add_bcast, mul_bcast, concat_axis and
slice_axis (and their gradients).

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_axis_op_refs.py

It rewrites tests/data/axis_op_refs/*.ref in gen_transformer_refs.py's format (its
docstring), read by tests/backend/axis_ops_test.cc, so CI needs no PyTorch. Each case runs
the op as a PyTorch user writes it (x * c, a + b with broadcasting, torch.cat of an
expanded class token, x[:, s:e]) and autograd with a random upstream gradient dy; the
gradients of broadcast operands are PyTorch's sums over the repeated axes.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case, randn  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "axis_op_refs")


def write(case):
    case.lines[1] = case.lines[1].replace("gen_transformer_refs.py", "gen_axis_op_refs.py")
    with open(os.path.join(OUT, case.name + ".ref"), "w") as f:
        f.write("\n".join(case.lines) + "\n")


def scale_case(name, shape, factor):
    x = randn(*shape).requires_grad_()
    y = x * factor
    dy = randn(*y.shape)
    y.backward(dy)
    c = Case(name, "scale: y = factor * x")
    c.attr("factor", factor)
    c.tensor("x", x).tensor("dy", dy).tensor("y", y).tensor("dx", x.grad)
    write(c)


def binary_case(name, a_shape, b_shape, mul):
    a = randn(*a_shape).requires_grad_()
    b = randn(*b_shape).requires_grad_()
    y = a * b if mul else a + b
    dy = randn(*y.shape)
    y.backward(dy)
    c = Case(name, ("mul" if mul else "add") + " with numpy broadcasting")
    c.attr("mul", mul)
    c.tensor("a", a).tensor("b", b).tensor("dy", dy).tensor("y", y)
    c.tensor("da", a.grad).tensor("db", b.grad)
    write(c)


def concat_case(name, shapes, axis, expand_first=False):
    xs = [randn(*s).requires_grad_() for s in shapes]
    parts = list(xs)
    if expand_first:  # the class token: [1,1,D] expanded to the batch of the next operand
        parts[0] = xs[0].expand(shapes[1][0], -1, -1)
    y = torch.cat(parts, dim=axis)
    dy = randn(*y.shape)
    y.backward(dy)
    c = Case(name, "torch.cat along one axis" + (" of an expanded class token" if expand_first
                                                 else ""))
    c.attr("axis", axis).attr("count", len(xs))
    for i, x in enumerate(xs):
        c.tensor(f"x{i}", x)
    c.tensor("dy", dy).tensor("y", y)
    for i, x in enumerate(xs):
        c.tensor(f"dx{i}", x.grad)
    write(c)


def slice_case(name, shape, axis, start, end):
    x = randn(*shape).requires_grad_()
    y = x.narrow(axis, start, end - start)
    dy = randn(*y.shape)
    y.backward(dy)
    c = Case(name, "x[start:end] along one axis")
    c.attr("axis", axis).attr("start", start).attr("end", end)
    c.tensor("x", x).tensor("dy", dy).tensor("y", y).tensor("dx", x.grad)
    write(c)


def main():
    if not torch.__version__.startswith("1.13"):
        sys.exit(f"gen_axis_op_refs.py: wants PyTorch 1.13 (run /usr/bin/python3), "
                 f"found {torch.__version__}")
    torch.manual_seed(20261127)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".ref"):
            os.remove(os.path.join(OUT, f))
    scale_case("scale_attention", (2, 4, 5, 8), 1 / math.sqrt(8))
    scale_case("scale_negative", (3, 7), -2.5)
    binary_case("add_bcast_position", (4, 5, 8), (1, 5, 8), False)
    binary_case("add_bcast_bias", (3, 4, 6), (6,), False)
    binary_case("add_bcast_both", (4, 1, 6), (5, 1), False)
    binary_case("mul_bcast_same", (3, 7), (3, 7), False)
    binary_case("mul_bcast_rows", (2, 3, 5), (2, 3, 1), True)
    binary_case("mul_bcast_both", (5, 1), (4, 1, 6), True)
    concat_case("concat_axis_cls", [(1, 1, 8), (3, 4, 8)], 1, expand_first=True)
    concat_case("concat_axis_three", [(2, 3, 4), (2, 1, 4), (2, 2, 4)], -2)
    concat_case("concat_axis_first", [(1, 5), (3, 5)], 0)
    slice_case("slice_axis_cls", (3, 5, 8), 1, 0, 1)
    slice_case("slice_axis_last", (2, 3, 10), -1, 4, 9)
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}")


if __name__ == "__main__":
    main()
