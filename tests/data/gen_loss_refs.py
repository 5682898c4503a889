#!/usr/bin/python3
"""Writes the PyTorch reference cases of the loss ops: mse_loss, l1_loss, smooth_l1_loss,
bce_with_logits and softmax_cross_entropy with a class axis, ignore_index, class weights
and label smoothing (their values and the gradients of the input), and of two small
models trained one SGD step with a loss (a regression with MSE and a sequence model with
a weighted, ignoring cross-entropy over its last axis).

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_loss_refs.py

It rewrites tests/data/loss_refs/*.ref in gen_transformer_refs.py's format (its
docstring), read by tests/backend/loss_ops_refs_test.cc and
tests/runtime/loss_training_test.cc, so CI needs no PyTorch. The ops run as a PyTorch
user writes them: F.mse_loss(x, t, reduction=...), F.cross_entropy(logits, labels,
weight=w, ignore_index=i, label_smoothing=eps) over the whole batch (Tandem's mean divides
by the same global count on any split).
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case, randn  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loss_refs")


def write(case):
    case.lines[1] = case.lines[1].replace("gen_transformer_refs.py", "gen_loss_refs.py")
    with open(os.path.join(OUT, case.name + ".ref"), "w") as f:
        f.write("\n".join(case.lines) + "\n")


def pointwise_case(name, op, shape, reduction, dloss, beta=None, pos_weight_shape=None,
                   scale=1.0):
    x = (randn(*shape) * scale).requires_grad_()
    if op == "bce_with_logits":
        t = torch.rand(*shape)
        t.view(-1)[:3] = torch.tensor([0.0, 1.0, 1.0])  # hard labels too
    else:
        t = randn(*shape)
        t.view(-1)[:2] = x.detach().view(-1)[:2]  # d = 0: the gradient's tie (L1's sign)
    pos_weight = None
    if op == "mse_loss":
        loss = F.mse_loss(x, t, reduction=reduction)
    elif op == "l1_loss":
        loss = F.l1_loss(x, t, reduction=reduction)
    elif op == "smooth_l1_loss":
        loss = F.smooth_l1_loss(x, t, reduction=reduction, beta=beta)
    else:
        if pos_weight_shape is not None:
            pos_weight = torch.rand(*pos_weight_shape) * 3
        loss = F.binary_cross_entropy_with_logits(x, t, reduction=reduction,
                                                  pos_weight=pos_weight)
    loss.backward(torch.tensor(dloss))
    c = Case(name, f"F.{op}(x, target, reduction={reduction})")
    c.attr("op", op).attr("reduction", reduction).attr("dloss", float(dloss))
    c.attr("beta", float(beta if beta is not None else 1.0))
    c.attr("has_pos_weight", pos_weight is not None)
    c.tensor("x", x).tensor("target", t)
    if pos_weight is not None:
        c.tensor("pos_weight", pos_weight)
    c.tensor("loss", loss.reshape(1)).tensor("dx", x.grad)
    write(c)


def cross_entropy_case(name, shape, axis, reduction, dloss, ignore_index=None, weighted=False,
                       smoothing=0.0):
    """logits of `shape` with the classes on `axis`; F.cross_entropy takes them on axis 1."""
    classes = shape[axis]
    logits = (randn(*shape) * 3).requires_grad_()
    label_shape = list(shape)
    del label_shape[axis]
    labels = torch.randint(0, classes, label_shape)
    flat = labels.view(-1)
    if ignore_index is not None:
        flat[1] = ignore_index
        flat[-1] = ignore_index
        flat[len(flat) // 2] = ignore_index
    weight = torch.rand(classes) * 2 + 0.25 if weighted else None
    moved = logits.movedim(axis, 1)
    kwargs = dict(weight=weight, reduction=reduction, label_smoothing=smoothing)
    if ignore_index is not None:
        kwargs["ignore_index"] = ignore_index
    loss = F.cross_entropy(moved, labels, **kwargs)
    loss.backward(torch.tensor(dloss))
    c = Case(name, "F.cross_entropy(logits (classes on axis), labels, weight, ignore_index, "
                   "label_smoothing, reduction)")
    c.attr("axis", axis).attr("reduction", reduction).attr("dloss", float(dloss))
    c.attr("has_ignore_index", ignore_index is not None)
    c.attr("ignore_index", ignore_index if ignore_index is not None else -100)
    c.attr("weighted", weighted).attr("smoothing", float(smoothing))
    c.tensor("logits", logits).tensor("labels", labels)
    if weighted:
        c.tensor("weight", weight)
    c.tensor("loss", loss.reshape(1)).tensor("dlogits", logits.grad)
    write(c)


def sequence_model_case(name, batch, tokens, width, vocab, ignore_index, smoothing, lr):
    """x [N, T, D] -> nn.Linear(D, V) -> cross entropy over the last axis with class
    weights and ignore_index (mean over the counted tokens), one SGD step."""
    fc = torch.nn.Linear(width, vocab)
    weight = torch.rand(vocab) * 2 + 0.25
    c = Case(name, "x -> nn.Linear -> F.cross_entropy(weight, ignore_index, label_smoothing) "
                   "over the last axis, one SGD step")
    c.attr("batch", batch).attr("tokens", tokens).attr("width", width).attr("vocab", vocab)
    c.attr("ignore_index", ignore_index).attr("smoothing", float(smoothing)).attr("lr", float(lr))
    c.tensor("w0", fc.weight).tensor("b0", fc.bias).tensor("weight", weight)
    x = randn(batch, tokens, width)
    labels = torch.randint(0, vocab, (batch, tokens))
    # Ignored tokens spread unevenly: most in the first rows, so that a 3:1 split's devices
    # count different numbers (per-device means averaged would differ).
    labels[0, :] = ignore_index
    labels[1, 1:] = ignore_index
    labels[batch - 1, 0] = ignore_index
    opt = torch.optim.SGD(fc.parameters(), lr=lr)
    loss = F.cross_entropy(fc(x).movedim(2, 1), labels, weight=weight, ignore_index=ignore_index,
                           label_smoothing=smoothing)
    loss.backward()
    opt.step()
    c.tensor("x", x).tensor("labels", labels).tensor("loss", loss.reshape(1))
    c.tensor("w1", fc.weight).tensor("b1", fc.bias)
    write(c)


def regression_case(name, op, batch, width, outputs, lr, beta=1.0, pos_weight=False):
    """x [N, F] -> nn.Linear(F, K) -> a pointwise loss (mean) against a target, one SGD
    step."""
    fc = torch.nn.Linear(width, outputs)
    c = Case(name, f"x -> nn.Linear -> F.{op}(mean), one SGD step")
    c.attr("op", op).attr("batch", batch).attr("width", width).attr("outputs", outputs)
    c.attr("lr", float(lr)).attr("beta", float(beta)).attr("has_pos_weight", pos_weight)
    c.tensor("w0", fc.weight).tensor("b0", fc.bias)
    x = randn(batch, width)
    t = torch.rand(batch, outputs) if op == "bce_with_logits" else randn(batch, outputs)
    opt = torch.optim.SGD(fc.parameters(), lr=lr)
    y = fc(x)
    pw = None
    if op == "mse_loss":
        loss = F.mse_loss(y, t)
    elif op == "l1_loss":
        loss = F.l1_loss(y, t)
    elif op == "smooth_l1_loss":
        loss = F.smooth_l1_loss(y, t, beta=beta)
    else:
        pw = torch.rand(outputs) * 3 if pos_weight else None
        loss = F.binary_cross_entropy_with_logits(y, t, pos_weight=pw)
    loss.backward()
    opt.step()
    c.tensor("x", x).tensor("target", t)
    if pw is not None:
        c.tensor("pos_weight", pw)
    c.tensor("loss", loss.reshape(1)).tensor("w1", fc.weight).tensor("b1", fc.bias)
    write(c)


def main():
    if not torch.__version__.startswith("1.13"):
        sys.exit(f"gen_loss_refs.py: wants PyTorch 1.13 (run /usr/bin/python3), "
                 f"found {torch.__version__}")
    torch.manual_seed(20261129)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".ref"):
            os.remove(os.path.join(OUT, f))
    pointwise_case("mse_mean", "mse_loss", (6, 4), "mean", 1.0)
    pointwise_case("mse_sum_3d", "mse_loss", (3, 2, 5), "sum", 0.5)
    pointwise_case("l1_mean", "l1_loss", (5, 3), "mean", 1.0)
    pointwise_case("l1_sum", "l1_loss", (4, 2, 2), "sum", 2.0)
    pointwise_case("smooth_l1_beta1", "smooth_l1_loss", (8, 3), "mean", 1.0, beta=1.0, scale=2.0)
    pointwise_case("smooth_l1_beta05_sum", "smooth_l1_loss", (4, 5), "sum", 1.5, beta=0.5,
                   scale=2.0)
    pointwise_case("smooth_l1_beta0", "smooth_l1_loss", (5, 4), "mean", 1.0, beta=0.0)
    pointwise_case("bce_mean", "bce_with_logits", (6, 3), "mean", 1.0, scale=3.0)
    pointwise_case("bce_large_logits", "bce_with_logits", (4, 4), "sum", 1.0, scale=40.0)
    pointwise_case("bce_pos_weight", "bce_with_logits", (5, 4), "mean", 1.0,
                   pos_weight_shape=(4,), scale=3.0)
    pointwise_case("bce_pos_weight_3d", "bce_with_logits", (2, 3, 4), "sum", 0.75,
                   pos_weight_shape=(3, 4), scale=3.0)
    cross_entropy_case("ce_last_axis_3d", (3, 4, 7), 2, "mean", 1.0, ignore_index=0)
    cross_entropy_case("ce_axis1_4d", (2, 5, 3, 2), 1, "mean", 1.0, ignore_index=-100)
    cross_entropy_case("ce_ignore", (10, 6), 1, "mean", 1.0, ignore_index=3)
    cross_entropy_case("ce_weight", (10, 6), 1, "mean", 1.0, ignore_index=-100, weighted=True)
    cross_entropy_case("ce_weight_smooth", (9, 5), 1, "mean", 0.5, ignore_index=2, weighted=True,
                       smoothing=0.1)
    cross_entropy_case("ce_weight_sum", (7, 4), 1, "sum", 1.0, ignore_index=-100, weighted=True,
                       smoothing=0.2)
    cross_entropy_case("ce_weight_smooth_3d", (2, 3, 6), 2, "mean", 1.0, ignore_index=5,
                       weighted=True, smoothing=0.3)
    cross_entropy_case("ce_smooth_ignore", (8, 5), 1, "mean", 1.0, ignore_index=1, smoothing=0.2)
    sequence_model_case("sequence_model", 8, 3, 5, 6, 0, 0.1, 0.5)
    regression_case("regression_mse", "mse_loss", 8, 5, 3, 0.1)
    regression_case("regression_l1", "l1_loss", 8, 5, 3, 0.1)
    regression_case("regression_smooth_l1", "smooth_l1_loss", 8, 5, 3, 0.1, beta=0.5)
    regression_case("regression_bce", "bce_with_logits", 8, 5, 3, 0.1, pos_weight=True)
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}")


if __name__ == "__main__":
    main()
