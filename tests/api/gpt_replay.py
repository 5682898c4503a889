"""Replays tests/api/gpt_replay_test.cc's 20 GPT training steps in PyTorch and compares the losses.

    gpt_replay.py WEIGHTS WINDOWS LOSSES --vocab V --context T --layers L --heads H
                  [--warmup W] [--tolerance 1e-4]

WEIGHTS holds Tandem's initial weights (a line "NAME D0 D1 ..." then a line of values, per
variable), WINDOWS one training window a line (T + 1 token ids: x is the first T, y the last
T), LOSSES Tandem's loss of every step, one a line. Each step trains on all the windows
(the whole set is one batch).

The model is frontend/zoo/gpt.cc's (nanoGPT's structure): token table wte [V, D], position
table wpe [1, T, D], per block h<i>: x + c_proj(attn(ln_1(x))) with separate q, k, v linear
layers (bias) and causal softmax(q k^T / sqrt(d)) v per head, then x + c_proj(gelu(c_fc(ln_2
(x)))) (exact GELU, 4x width), final ln_f, logits = ln_f(x) wte^T (tied). Cross-entropy over
every token. AdamW (PyTorch's) lr 1e-3, betas 0.9 / 0.99, eps 1e-8, weight decay 0.1 on the
linear weights only; the learning-rate factor of runtime/lr_schedule.cc's cosine:0.1 after W
warmup steps: f = 0.1 + 0.9 * (1 + cos(pi t / span)) / 2 with t = clamp(step - W, 0, span)
and span = steps - W, times (step + 1) / W during the warmup; the gradients' global norm
clipped at 1 (torch.nn.utils.clip_grad_norm_).

Prints every step's losses and relative difference, then the largest; exits 1 when one
exceeds the tolerance, 2 on bad input.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay_steps import compare_steps, lr_factor, read_weights  # noqa: E402


class Gpt(torch.nn.Module):
    def __init__(self, w, layers, heads):
        super().__init__()
        self.heads = heads
        self.layers = layers
        self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(v.clone())
                                         for k, v in w.items()})

    def w(self, name):
        return self.p[name.replace(".", "_")]

    def linear(self, x, name):
        return F.linear(x, self.w(name + ".w"), self.w(name + ".b"))

    def ln(self, x, name):
        return F.layer_norm(x, (x.shape[-1],), self.w(name + ".gamma"), self.w(name + ".beta"),
                            1e-5)

    def forward(self, ids):
        n, t = ids.shape
        h = F.embedding(ids, self.w("wte.table")) + self.w("wpe.table")
        for i in range(self.layers):
            a = self.ln(h, f"h{i}.attn.ln_1")
            q, k, v = (self.linear(a, f"h{i}.attn.{x}") for x in "qkv")
            d = q.shape[-1] // self.heads
            q, k, v = (x.view(n, t, self.heads, d).transpose(1, 2) for x in (q, k, v))
            s = q @ k.transpose(-1, -2) / math.sqrt(d)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(n, t, -1)
            h = h + self.linear(y, f"h{i}.attn.c_proj")
            m = self.ln(h, f"h{i}.mlp.ln_2")
            h = h + self.linear(F.gelu(self.linear(m, f"h{i}.mlp.c_fc")), f"h{i}.mlp.c_proj")
        return self.ln(h, "ln_f") @ self.w("wte.table").t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("windows")
    ap.add_argument("losses")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--context", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    try:
        weights = read_weights(args.weights)
        rows = np.loadtxt(args.windows, dtype=np.int64, ndmin=2)
        expected = np.loadtxt(args.losses, dtype=np.float64, ndmin=1)
    except (OSError, ValueError) as e:
        print(f"gpt_replay: {e}", file=sys.stderr)
        return 2
    if rows.shape[1] != args.context + 1:
        print(f"gpt_replay: windows of {rows.shape[1]} ids, expected {args.context + 1}",
              file=sys.stderr)
        return 2
    x = torch.tensor(rows[:, :-1])
    y = torch.tensor(rows[:, 1:])
    model = Gpt(weights, args.layers, args.heads)
    # nanoGPT's groups: decay the linear layers' weights, not biases, norms or tables.
    decay = [p for k, p in model.p.items() if k.endswith("_w")]
    rest = [p for k, p in model.p.items() if not k.endswith("_w")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    steps = len(expected)

    def step(i):
        for g in opt.param_groups:
            g["lr"] = 1e-3 * lr_factor(i, steps, args.warmup, floor=0.1)
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return compare_steps(expected, step, args.tolerance)

if __name__ == "__main__":
    sys.exit(main())
