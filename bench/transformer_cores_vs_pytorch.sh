#!/usr/bin/env bash
# The transformer compute cores (bench/transformer_cores_bench) against PyTorch 1.13's
# counterparts (bench/transformer_cores_torch.py) at the ViT's per-device shapes, one
# thread each (a Tandem CPU device runs on one core), in one run. Prints per case the
# smallest of 5 repetitions of the CPU time per call on each side and PyTorch / Tandem
# (above 1: Tandem is faster), then the cases weighted by how often one ViT training step
# on one device runs them (6 blocks; see WEIGHTS below) as one figure per dtype.
#
#   bench/transformer_cores_vs_pytorch.sh [--build DIR] [--filter REGEX] [--min-time S]
#
#   --build DIR     build directory holding bench/transformer_cores_bench (default build)
#   --filter REGEX  only the cases whose name matches (default: all)
#   --min-time S    seconds of CPU per repetition and case (default 0.2)
#
# PyTorch is Debian's python3-torch under /usr/bin/python3 (TANDEM_PYTHON overrides).
# Where OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is set, PyTorch runs once with them and once
# without; the results must agree, and each case is compared against the faster run.
set -euo pipefail

build=build
filter=.
min_time=0.2
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --filter) filter="${2:?--filter needs a value}"; shift 2 ;;
    --min-time) min_time="${2:?--min-time needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "transformer_cores_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=transformer_cores_vs_pytorch
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
[[ "$build" = /* ]] || build="$root/$build"
python="${TANDEM_PYTHON:-/usr/bin/python3}"
"$python" -c "import torch" >/dev/null 2>&1 || {
  echo "$name: $python cannot import torch; install it with: apt-get install python3-torch libopenblas0-pthread" >&2
  exit 1
}
bench="$build/bench/transformer_cores_bench"
[[ -x "$bench" ]] || {
  echo "$name: $bench not found; build it with: ninja -C $build transformer_cores_bench (or pass --build DIR)" >&2
  exit 1
}
[[ "$min_time" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "$name: --min-time must be a number of seconds, got '$min_time'" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "== Tandem: $bench (5 repetitions of ${min_time} s)" >&2
"$bench" --benchmark_filter="$filter" --benchmark_min_time="$min_time" --benchmark_repetitions=5 \
  --benchmark_format=json >"$TMP/tandem.json"
echo "== PyTorch $("$python" -c 'import torch; print(torch.__version__)'), 1 thread" >&2
"$python" "$here/transformer_cores_torch.py" --filter "$filter" --min-time "$min_time" >"$TMP/pt_env.txt"
if [[ -n "${OPENBLAS_CORETYPE:-}${OPENBLAS_L2_SIZE:-}" ]]; then
  echo "== PyTorch again without OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-}" >&2
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    "$python" "$here/transformer_cores_torch.py" --filter "$filter" --min-time "$min_time" >"$TMP/pt_unset.txt"
fi

"$python" - "$TMP" <<'PY'
import json, os, sys
tmp = sys.argv[1]
# One ViT training step on one device: 6 blocks of a qkv, attention and projection,
# and an MLP; two layer norms a block and a final one; dropout after the attention
# projection and in the MLP, each forward and backward, counted as 12 calls at the
# MLP's shape; one AdamW update of every parameter.
WEIGHTS = {"Matmul": 6, "LayerNorm": 13, "Softmax": 6, "Gelu": 6, "Dropout": 12, "AdamW": 1}

tandem = {}
for b in json.load(open(os.path.join(tmp, "tandem.json")))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    name = b["run_name"].split("/208000")[0]
    ns = b["cpu_time"] * {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
    tandem[name] = min(tandem.get(name, ns), ns)

def read(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            n, ns, check = line.split()
            out[n] = (float(ns), float(check))
    return out
runs = {"env": read(os.path.join(tmp, "pt_env.txt")), "unset": read(os.path.join(tmp, "pt_unset.txt"))}
if runs["unset"]:
    for n, (_, a) in runs["env"].items():
        if n.startswith(("Dropout", "AdamW")) or n not in runs["unset"]:
            continue  # random or stateful: no checksum to compare
        b = runs["unset"][n][1]
        if abs(a - b) > 1e-3 * max(1.0, abs(a)):
            sys.exit(f"transformer_cores_vs_pytorch: PyTorch's {n} differs with and without "
                     f"the OPENBLAS variables ({a} vs {b})")

print(f"{'case':28} {'Tandem us':>10} {'PyTorch us':>11} {'PyTorch/Tandem':>15}  (PyTorch run)")
totals = {}
for n in sorted(tandem):
    choices = [(r[n][0], k) for k, r in runs.items() if n in r]
    if not choices:
        continue
    pt, which = min(choices)
    print(f"{n:28} {tandem[n] / 1e3:10.1f} {pt / 1e3:11.1f} {pt / tandem[n]:15.2f}  ({which})")
    dtype = "bf16" if n.endswith("bf16") else "f32"
    w = WEIGHTS[n.split("/")[0]]
    t, p = totals.get(dtype, (0.0, 0.0))
    totals[dtype] = (t + w * tandem[n], p + w * pt)
for dtype, (t, p) in sorted(totals.items()):
    print(f"one ViT step's cores, {dtype:4}: Tandem {t / 1e6:.1f} ms, PyTorch {p / 1e6:.1f} ms, "
          f"PyTorch/Tandem {p / t:.2f}")
PY
