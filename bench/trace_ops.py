#!/usr/bin/python3
"""Where a training step's time goes, per op kind, forward and backward, from the timeline
that `tandem train --trace FILE` writes (Chrome trace JSON: every node of the traced steps
with its op, node name and stream).

  tandem train --model vit --devices cpu:0,cpu:1 --epochs 1 --limit-train 2048 \\
      --limit-test 256 --warmup 1 --trace vit.json --trace-steps 5
  bench/trace_ops.py vit.json

`tandem train --profile` prints the per-op totals; this splits each op kind into the
forward pass, the backward pass (autodiff names its nodes NAME.grad..., and the
*_backward ops), the optimizer update and the communication streams, per device and step,
and sets each against the step's wall time (first node start to last node end of a step on
any device) so that the idle time (waits for the other device, the all_reduce, the host)
shows too.
"""

import argparse
import collections
import json
import sys

UPDATE_OPS = {"adamw_update", "sgd_update"}


def phase(event):
    args = event["args"]
    if event.get("cat") == "comm":
        return "comm"
    if args["op"] in UPDATE_OPS:
        return "update"
    node = args["node"].split(" ", 1)[0]
    if ".grad" in node or args["op"].endswith("_backward") or "_backward_" in args["op"]:
        return "backward"
    return "forward"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace", help="JSON written by tandem train --trace")
    p.add_argument("--top", type=int, default=0, help="only the N costliest op kinds")
    args = p.parse_args()
    with open(args.trace) as f:
        data = json.load(f)
    events = [e for e in (data["traceEvents"] if isinstance(data, dict) else data)
              if e.get("ph") == "X" and "op" in e.get("args", {})]
    if not events:
        sys.exit(f"{args.trace}: no node events (written by tandem train --trace?)")

    devices = {e["pid"] for e in events}
    steps = collections.defaultdict(lambda: [float("inf"), 0.0])
    seconds = collections.defaultdict(float)  # (op, phase) -> us over all devices and steps
    runs = collections.Counter()
    for e in events:
        span = steps[e["args"]["step"]]
        span[0] = min(span[0], e["ts"])
        span[1] = max(span[1], e["ts"] + e["dur"])
        key = (e["args"]["op"], phase(e))
        seconds[key] += e["dur"]
        runs[key] += 1
    n_steps, n_dev = len(steps), len(devices)
    per = n_steps * n_dev * 1e3  # us summed over devices and steps -> ms per device-step
    wall = sum(b - a for a, b in steps.values()) / n_steps / 1e3
    compute = sum(v for (op, ph), v in seconds.items() if ph != "comm") / per

    ops = collections.defaultdict(dict)
    for (op, ph), v in seconds.items():
        ops[op][ph] = v / per
    rows = sorted(ops.items(), key=lambda kv: -sum(kv[1].values()))
    if args.top:
        rows = rows[:args.top]
    print(f"{n_steps} steps on {n_dev} devices: step wall {wall:.1f} ms, compute per device "
          f"{compute:.1f} ms ({100 * compute / wall:.0f} % of the wall; the rest waits)")
    print(f"{'op':<32} {'fwd ms':>8} {'bwd ms':>8} {'upd ms':>8} {'comm ms':>8} "
          f"{'% compute':>9} {'% wall':>7} {'nodes':>6}")
    totals = collections.Counter()
    for op, by in rows:
        total = sum(v for ph, v in by.items() if ph != "comm")
        nodes = sum(runs[(op, ph)] for ph in by) // (n_steps * n_dev)
        for ph, v in by.items():
            totals[ph] += v
        print(f"{op:<32} {by.get('forward', 0):8.2f} {by.get('backward', 0):8.2f} "
              f"{by.get('update', 0):8.2f} {by.get('comm', 0):8.2f} "
              f"{100 * total / compute:8.1f}% {100 * total / wall:6.1f}% {nodes:6d}")
    print(f"{'all':<32} {totals['forward']:8.2f} {totals['backward']:8.2f} "
          f"{totals['update']:8.2f} {totals['comm']:8.2f} {100.0:8.1f}% "
          f"{100 * compute / wall:6.1f}%")


if __name__ == "__main__":
    main()
