"""Replays tests/api/vit_replay_test.cc's 20 ViT training steps in PyTorch and compares the losses.

    vit_replay.py WEIGHTS IMAGES LOSSES [--warmup W] [--tolerance 1e-4]

WEIGHTS holds Tandem's initial weights (a line "NAME D0 D1 ..." then a line of values, per
variable), IMAGES one example a line (its label, then the 784 pixels of its 1x28x28 image),
LOSSES Tandem's loss of every step, one a line. Each step trains on all the images (the
whole set is one batch).

The model is frontend/zoo/vit.cc's with dropout 0, as bench/pytorch_train.py writes it
(its Vit with attention written out): a stride-4 4x4 convolution into 49 patches of width
64, a class token and a learned position embedding, 6 pre-norm blocks (LayerNorm, q, k, v
linear layers, softmax(q k^T / sqrt(16)) v over 4 heads, an output projection; LayerNorm,
Linear 64->128, erf GELU, Linear 128->64), a final LayerNorm and a linear head on the
class token. AdamW (PyTorch's) lr 1e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 0.05 on
every parameter; runtime/lr_schedule.cc's cosine: f = (1 + cos(pi t / span)) / 2 with
t = clamp(step - W, 0, span), span = steps - W, times (step + 1) / W during the W warmup
steps. No gradient clipping.

Prints every step's losses and relative difference, then the largest; exits 1 when one
exceeds the tolerance, 2 on bad input.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from pytorch_train import Vit  # noqa: E402  (the ViT the speed comparisons train)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_steps import compare_steps, lr_factor, read_weights  # noqa: E402


def load(model, w):
    """Tandem's variables into the PyTorch module's parameters, by name."""
    names = {"patch.weight": "patch.w", "patch.bias": "patch.b", "cls": "cls", "pos": "pos",
             "ln.weight": "ln.gamma", "ln.bias": "ln.beta", "head.weight": "head.w",
             "head.bias": "head.b"}
    for i in range(len(model.blocks)):
        t, p = f"block{i}.", f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            names[p + ln + ".weight"], names[p + ln + ".bias"] = t + ln + ".gamma", t + ln + ".beta"
        for x in ("q", "k", "v", "proj"):
            names[p + f"attn.{x}.weight"], names[p + f"attn.{x}.bias"] = (t + f"attn.{x}.w",
                                                                          t + f"attn.{x}.b")
        for torch_index, fc in (("0", "fc1"), ("3", "fc2")):
            names[p + f"mlp.{torch_index}.weight"] = t + f"mlp.{fc}.w"
            names[p + f"mlp.{torch_index}.bias"] = t + f"mlp.{fc}.b"
    params = dict(model.named_parameters())
    if set(params) != set(names) or set(names.values()) != set(w):
        raise ValueError(f"weights {sorted(set(w) ^ set(names.values()))} do not map onto the "
                         f"module's parameters {sorted(set(params) ^ set(names))}")
    with torch.no_grad():
        for name, p in params.items():
            if tuple(p.shape) != tuple(w[names[name]].shape):
                raise ValueError(f"{names[name]}: {list(w[names[name]].shape)}, the module's "
                                 f"{name} is {list(p.shape)}")
            p.copy_(w[names[name]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("images")
    ap.add_argument("losses")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    try:
        weights = read_weights(args.weights)
        rows = np.loadtxt(args.images, dtype=np.float32, ndmin=2)
        expected = np.loadtxt(args.losses, dtype=np.float64, ndmin=1)
        if rows.shape[1] != 1 + 28 * 28:
            raise ValueError(f"examples of {rows.shape[1]} numbers, expected 1 + 784")
        model = Vit(attention="manual", p=0.0)
        load(model, weights)
    except (OSError, ValueError) as e:
        print(f"vit_replay: {e}", file=sys.stderr)
        return 2
    y = torch.tensor(rows[:, 0].astype(np.int64))
    x = torch.tensor(rows[:, 1:]).reshape(-1, 1, 28, 28)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.05)
    steps = len(expected)

    def step(i):
        for g in opt.param_groups:
            g["lr"] = 1e-3 * lr_factor(i, steps, args.warmup)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return compare_steps(expected, step, args.tolerance)

if __name__ == "__main__":
    sys.exit(main())
