#!/usr/bin/python3
"""Writes the PyTorch reference cases of the embedding op and of softmax_cross_entropy
with label smoothing (their values and gradients), and of a small token classifier trained
two SGD steps with both.

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_embedding_loss_refs.py

It rewrites tests/data/embedding_loss_refs/*.ref in gen_transformer_refs.py's format (its
docstring), read by tests/backend/embedding_loss_ops_test.cc and
tests/runtime/embedding_training_test.cc, so CI needs no PyTorch. The ops run as a PyTorch
user writes them: F.embedding over integer ids of any shape (repeated ids: the table's
gradient adds their rows), and nn.CrossEntropyLoss(label_smoothing=eps) with padding rows
(label -1, ignore_index) summed and divided by a global batch, as Tandem's loss divides.
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case, randn  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embedding_loss_refs")


def write(case):
    case.lines[1] = case.lines[1].replace("gen_transformer_refs.py", "gen_embedding_loss_refs.py")
    with open(os.path.join(OUT, case.name + ".ref"), "w") as f:
        f.write("\n".join(case.lines) + "\n")


def embedding_case(name, vocab, width, ids_shape, repeat):
    table = randn(vocab, width).requires_grad_()
    ids = torch.randint(0, vocab, ids_shape)
    ids.view(-1)[:repeat] = ids.view(-1)[0]  # one row picked `repeat` times at least
    y = F.embedding(ids, table)
    dy = randn(*y.shape)
    y.backward(dy)
    c = Case(name, "F.embedding(ids, table) and the table's gradient")
    c.attr("vocab", vocab).attr("width", width)
    c.tensor("table", table).tensor("ids", ids).tensor("dy", dy)
    c.tensor("y", y).tensor("dtable", table.grad)
    write(c)


def cross_entropy_case(name, rows, classes, smoothing, reduction, divisor, dloss):
    logits = (randn(rows, classes) * 3).requires_grad_()
    labels = torch.randint(0, classes, (rows,))
    labels[2] = -1  # padding rows of a last partial batch
    labels[rows - 1] = -1
    loss = F.cross_entropy(logits, labels, ignore_index=-1, reduction="sum",
                           label_smoothing=smoothing) / divisor
    loss.backward(torch.tensor(dloss))
    c = Case(name, "nn.CrossEntropyLoss(label_smoothing, ignore_index=-1, sum) / divisor")
    c.attr("smoothing", float(smoothing)).attr("reduction", reduction)
    c.attr("divisor", divisor).attr("dloss", float(dloss))
    c.tensor("logits", logits).tensor("labels", labels)
    c.tensor("loss", loss.reshape(1)).tensor("dlogits", logits.grad)
    write(c)


def token_classifier_case(name, batch, tokens, vocab, width, classes, smoothing, lr, steps):
    """ids [N, T] -> nn.Embedding -> mean over the tokens -> nn.Linear -> cross entropy with
    label smoothing (mean over the batch), `steps` plain SGD steps."""
    emb = torch.nn.Embedding(vocab, width)
    fc = torch.nn.Linear(width, classes)
    opt = torch.optim.SGD(list(emb.parameters()) + list(fc.parameters()), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=smoothing)
    c = Case(name, "ids -> nn.Embedding -> mean over tokens -> nn.Linear -> "
                   "CrossEntropyLoss(label_smoothing), SGD")
    c.attr("batch", batch).attr("tokens", tokens).attr("vocab", vocab).attr("width", width)
    c.attr("classes", classes).attr("smoothing", float(smoothing)).attr("lr", float(lr))
    c.attr("steps", steps)
    c.tensor("table0", emb.weight).tensor("w0", fc.weight).tensor("b0", fc.bias)
    for s in range(steps):
        ids = torch.randint(0, vocab, (batch, tokens))
        ids[:, 0] = s  # every sample starts with the same token: a row picked N times
        labels = torch.randint(0, classes, (batch,))
        opt.zero_grad()
        loss = loss_fn(fc(emb(ids).mean(1)), labels)
        loss.backward()
        opt.step()
        c.tensor(f"ids{s}", ids).tensor(f"labels{s}", labels).tensor(f"loss{s}", loss.reshape(1))
        c.tensor(f"table{s + 1}", emb.weight).tensor(f"w{s + 1}", fc.weight)
        c.tensor(f"b{s + 1}", fc.bias)
    write(c)


def main():
    if not torch.__version__.startswith("1.13"):
        sys.exit(f"gen_embedding_loss_refs.py: wants PyTorch 1.13 (run /usr/bin/python3), "
                 f"found {torch.__version__}")
    torch.manual_seed(20261127)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".ref"):
            os.remove(os.path.join(OUT, f))
    embedding_case("embedding_tokens", 9, 5, (4, 6), 5)
    embedding_case("embedding_flat", 40, 3, (7,), 2)
    embedding_case("embedding_3d", 6, 8, (2, 3, 4), 4)
    cross_entropy_case("cross_entropy_eps0", 12, 10, 0.0, "mean", 24, 1.0)
    cross_entropy_case("cross_entropy_eps005", 12, 10, 0.05, "mean", 24, 1.0)
    cross_entropy_case("cross_entropy_eps02", 9, 7, 0.2, "mean", 9, 0.5)
    cross_entropy_case("cross_entropy_eps06_sum", 6, 4, 0.6, "sum", 1, 2.0)
    token_classifier_case("token_classifier", 8, 5, 11, 6, 4, 0.1, 0.5, 2)
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}")


if __name__ == "__main__":
    main()
