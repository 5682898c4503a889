#!/usr/bin/env bash
# Depthwise convolutions (MobileNet v2's 3x3 layers at 224x224, 8 images a device) on
# Tandem's CPU kernels (bench/cpu_kernels_bench, Depthwise*<kAuto>: the kernel table's
# choice, oneDNN's jit_dw on channel-blocked tensors, reorders included) against PyTorch
# 1.13's and, with --pytorch2, PyTorch 2.6's (bench/depthwise_torch.py), one thread each,
# in one run. Prints per pass and shape the smallest of 5 repetitions of the CPU time per
# call on each side and the faster PyTorch / Tandem (above 1: Tandem is faster), then each
# pass summed over the shapes.
#
#   bench/depthwise_vs_pytorch.sh [--build DIR] [--min-time S] [--pytorch2 TOOL]
#
#   --pytorch2 TOOL  also run PyTorch 2.6 through TOOL (../shared/tools/pytorch2)
#
# PyTorch is Debian's python3-torch under /usr/bin/python3 (TANDEM_PYTHON overrides), with
# OPENBLAS_NUM_THREADS=1 and OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (its fastest here).
set -euo pipefail

build=build
min_time=0.5
pytorch2=
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --min-time) min_time="${2:?--min-time needs a value}"; shift 2 ;;
    --pytorch2) pytorch2="${2:?--pytorch2 needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "depthwise_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=depthwise_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
find_tools
bench="$build/bench/cpu_kernels_bench"
[[ -x "$bench" ]] || {
  echo "$name: $bench not found; build it with: ninja -C $build cpu_kernels_bench (or pass --build DIR)" >&2
  exit 1
}
[[ "$min_time" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "$name: --min-time must be a number of seconds, got '$min_time'" >&2; exit 2; }

echo "== Tandem: $bench Depthwise*<kAuto> (5 repetitions of ${min_time} s)" >&2
"$bench" --benchmark_filter='Depthwise.*<kAuto>' --benchmark_min_time="$min_time" \
  --benchmark_repetitions=5 --benchmark_format=json >"$TMP/tandem.json"
echo "== PyTorch $("$python" -c 'import torch; print(torch.__version__)'), 1 thread" >&2
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \
  "$python" "$here/depthwise_torch.py" --min-time "$min_time" >"$TMP/pytorch.txt"
if [[ -n "$pytorch2" ]]; then
  echo "== PyTorch $("$pytorch2" python3 -c 'import torch; print(torch.__version__)' | tail -1), 1 thread" >&2
  "$pytorch2" env OPENBLAS_NUM_THREADS=1 python3 "$here/depthwise_torch.py" --min-time "$min_time" \
    >"$TMP/pytorch2.txt"
fi

"$python" - "$TMP" <<'PY'
import json, os, re, sys
tmp = sys.argv[1]
tandem = {}
for b in json.load(open(os.path.join(tmp, "tandem.json")))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    m = re.match(r"Depthwise(\w+)<kAuto>/N:\d+/C:(\d+)/H:(\d+)/O:\d+/K:\d+/s:(\d+)", b["run_name"])
    key = f"{m.group(1)}/C:{m.group(2)}/H:{m.group(3)}/s:{m.group(4)}"
    ns = b["cpu_time"] * {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
    tandem[key] = min(tandem.get(key, ns), ns)
def read(name):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return {}
    return {key: float(ns) for key, ns in (line.split() for line in open(path))}
pt1, pt2 = read("pytorch.txt"), read("pytorch2.txt")
print(f"{'pass/shape':34} {'Tandem ms':>10} {'PT 1.13 ms':>11} {'PT 2.6 ms':>10} "
      f"{'best PT/Tandem':>15}")
totals = {}
for key in pt1:
    if key not in tandem:
        sys.exit(f"depthwise_vs_pytorch: Tandem's benchmark has no {key}")
    t, p1, p2 = tandem[key], pt1[key], pt2.get(key, float("nan"))
    best = min(p1, p2) if pt2 else p1
    p2_text = f"{p2 / 1e6:10.2f}" if pt2 else f"{'-':>10}"
    print(f"{key:34} {t / 1e6:10.2f} {p1 / 1e6:11.2f} {p2_text} {best / t:15.2f}")
    sums = totals.setdefault(key.split("/")[0], [0.0, 0.0, 0.0])
    for i, v in enumerate((t, p1, p2 if pt2 else 0.0)):
        sums[i] += v
for pass_, (t, p1, p2) in totals.items():
    best = min(p1, p2) if pt2 else p1
    p2_text = f"{p2 / 1e6:10.2f}" if pt2 else f"{'-':>10}"
    print(f"{pass_ + ', all shapes':34} {t / 1e6:10.2f} {p1 / 1e6:11.2f} {p2_text} {best / t:15.2f}")
PY
