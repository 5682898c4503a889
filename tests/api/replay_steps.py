"""What the replays of Tandem's training steps in PyTorch share (gpt_replay.py,
vit_replay.py): reading Tandem's weights, runtime/lr_schedule.cc's learning-rate factor,
and the step-by-step comparison of the losses."""
import math

import numpy as np
import torch


def read_weights(path):
    """Tandem's weights as written by tests/api/replay_util.h: per variable a line
    "NAME D0 D1 ..." and a line of its values."""
    weights = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for head, values in zip(lines[0::2], lines[1::2]):
        name, *shape = head.split()
        array = np.array([float(v) for v in values.split()], dtype=np.float32)
        weights[name] = torch.tensor(array.reshape([int(d) for d in shape]))
    return weights


def lr_factor(step, steps, warmup, floor=0.0):
    """runtime/lr_schedule.cc's cosine (to `floor`) after `warmup` steps: f = floor + (1 -
    floor) (1 + cos(pi t / span)) / 2 with t = clamp(step - warmup, 0, span), span = steps -
    warmup, times (step + 1) / warmup during the warmup."""
    span = steps - warmup
    t = min(max(step - warmup, 0), span)
    f = floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t / span))
    return f * (step + 1) / warmup if step < warmup else f


def compare_steps(expected, step, tolerance):
    """Runs step(i) -> PyTorch's loss for each of Tandem's `expected` losses, printing both
    and their relative difference, then the largest; 0 when every one is within
    `tolerance`, else 1."""
    worst = 0.0
    print("step  tandem        pytorch       relative difference")
    for i, want in enumerate(expected):
        got = float(step(i))
        rel = abs(want - got) / abs(got)
        worst = max(worst, rel)
        print(f"{i + 1:4d}  {want:.8f}  {got:.8f}  {rel:.2e}")
    print(f"largest relative difference {worst:.3g} (tolerance {tolerance:g})")
    return 0 if worst <= tolerance else 1
