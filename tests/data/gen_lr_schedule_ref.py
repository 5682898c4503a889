#!/usr/bin/python3
"""Writes PyTorch's learning rates for the schedules `tandem train --schedule/--warmup`
offers: the outside oracle of runtime/lr_schedule.cc (tests/runtime/lr_schedule_test.cc).

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_lr_schedule_ref.py

Each case is a run of EPOCHS epochs of STEPS_PER_EPOCH updates with base lr 1; the
schedulers are stepped once per update, as `tandem train` feeds a factor per update, and
the tensor `lr` holds the lr each update used. Tandem's warmup (update s of the first W
gets (s + 1) / W) is LinearLR(start_factor=1/W, total_iters=W-1); cosine after it is
CosineAnnealingLR over the updates left (SequentialLR); step:E:G is StepLR with a step of
E epochs, multiplied with the warmup (ChainedScheduler).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_transformer_refs import Case  # noqa: E402


def lrs(make, steps):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def case(name, schedule, warmup, spe, epochs, make):
    total = spe * epochs
    c = Case(name, f"--schedule {schedule} --warmup {warmup}: PyTorch's lr per update")
    c.lines[1] = (f"# written by tests/data/gen_lr_schedule_ref.py with PyTorch "
                  f"{torch.__version__}; do not edit")
    c.attr("schedule", schedule).attr("warmup", warmup).attr("steps_per_epoch", spe)
    c.attr("epochs", epochs)
    c.tensor("lr", torch.tensor(lrs(make, total), dtype=torch.float64))
    c.write()


def main():
    S = torch.optim.lr_scheduler
    case("lr_schedule_cosine", "cosine", 0, 7, 3,
         lambda o: S.CosineAnnealingLR(o, T_max=21))
    case("lr_schedule_cosine_warmup", "cosine", 5, 7, 3,
         lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=1 / 5, total_iters=4),
                                      S.CosineAnnealingLR(o, T_max=21 - 5)], milestones=[5]))
    case("lr_schedule_step", "step:2:0.5", 0, 4, 7,
         lambda o: S.StepLR(o, step_size=2 * 4, gamma=0.5))
    case("lr_schedule_step_warmup", "step:2:0.5", 3, 4, 7,
         lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=1 / 3, total_iters=2),
                                       S.StepLR(o, step_size=2 * 4, gamma=0.5)]))
    case("lr_schedule_constant_warmup", "constant", 4, 3, 2,
         lambda o: S.LinearLR(o, start_factor=1 / 4, total_iters=3))


if __name__ == "__main__":
    main()
