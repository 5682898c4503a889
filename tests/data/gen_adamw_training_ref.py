#!/usr/bin/python3
"""Writes the PyTorch reference of AdamW training a small MLP (the outside oracle of
adamw_update as autodiff, the all_reduce and the trainer wire it).

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_adamw_training_ref.py

It rewrites tests/data/transformer_refs/adamw_mlp_training.ref (the format of
gen_transformer_refs.py), which tests/runtime/adamw_training_test.cc reads. The model is
flatten -> fc1 (784 -> 32) -> relu -> fc2 (32 -> 10), mean softmax cross-entropy, trained
by torch.optim.AdamW for a few steps of 16 images. The initial weights and the data are
integer hashes that the C++ test computes bit for bit the same (no weights in the file):

    weight element i of layer l: ((i * 2654435761 + 97 * l) mod 2^32 / 2^32 - 0.5) * scale_l
    pixel j of step s:           ((j * 40503 + 12345 * s) mod 65536) / 65536
    label k of step s:           (7 * k + 3 * s) mod 10

The file holds the hyper-parameters, each step's loss and every parameter after the last
step. adamw_mlp_training_cosine trains 6 steps under --schedule cosine --warmup 2.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case  # noqa: E402

BATCH, STEPS, HIDDEN = 16, 4, 32
LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, (0.9, 0.99), 1e-8, 0.05
# (name, shape, scale): PyTorch's names and [out, in] layout, which Tandem shares.
PARAMS = [("fc1.w", (HIDDEN, 784), 0.0625), ("fc1.b", (HIDDEN,), 0.125),
          ("fc2.w", (10, HIDDEN), 0.25), ("fc2.b", (10,), 0.125)]


def hashed(layer, shape, scale):
    n = 1
    for d in shape:
        n *= d
    values = [(((i * 2654435761 + 97 * layer) % 2**32) / 2**32 - 0.5) * scale for i in range(n)]
    return torch.tensor(values, dtype=torch.float64).to(torch.float32).reshape(shape)


def batch(step):
    pixels = [((j * 40503 + 12345 * step) % 65536) / 65536 for j in range(BATCH * 784)]
    images = torch.tensor(pixels, dtype=torch.float32).reshape(BATCH, 1, 28, 28)
    labels = torch.tensor([(7 * k + 3 * step) % 10 for k in range(BATCH)], dtype=torch.int64)
    return images, labels


def train(name, steps, warmup=None):
    """`steps` updates; with `warmup`, the lr follows Tandem's --schedule cosine --warmup
    (LinearLR for the warmup, then CosineAnnealingLR over the rest, stepped per update)."""
    torch.set_num_threads(1)
    params = {name: torch.nn.Parameter(hashed(l, shape, scale))
              for l, (name, shape, scale) in enumerate(PARAMS)}
    opt = torch.optim.AdamW(list(params.values()), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)
    sched = None
    if warmup is not None:
        S = torch.optim.lr_scheduler
        sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=1 / warmup,
                                                total_iters=warmup - 1),
                                     S.CosineAnnealingLR(opt, T_max=steps - warmup)],
                               milestones=[warmup])
    case = Case(name,
                "torch.optim.AdamW training flatten-fc1-relu-fc2 (gen_adamw_training_ref.py)")
    case.lines[1] = (f"# written by tests/data/gen_adamw_training_ref.py with PyTorch "
                     f"{torch.__version__}; do not edit")
    case.attr("batch", BATCH).attr("steps", steps).attr("hidden", HIDDEN).attr("lr", LR)
    case.attr("beta1", BETAS[0]).attr("beta2", BETAS[1]).attr("eps", EPS)
    case.attr("weight_decay", WEIGHT_DECAY)
    if warmup is not None:
        case.attr("schedule", "cosine").attr("warmup", warmup)
    losses = []
    for step in range(steps):
        images, labels = batch(step)
        h = torch.relu(images.reshape(BATCH, -1) @ params["fc1.w"].t() + params["fc1.b"])
        logits = h @ params["fc2.w"].t() + params["fc2.b"]
        loss = torch.nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    case.tensor("losses", torch.tensor(losses))
    for name, _, _ in PARAMS:
        case.tensor(name, params[name])
    case.write()
    print(f"{case.name}: losses {losses}")


def main():
    train("adamw_mlp_training", STEPS)
    train("adamw_mlp_training_cosine", 6, warmup=2)


if __name__ == "__main__":
    main()
