#!/usr/bin/env bash
# Training throughput of LeNet on Fashion-MNIST, PyTorch (CPU, 2 threads) against Tandem
# (two CPU devices, data parallel), both at batch 256; prints both images/s and the ratio.
#
#   bench/lenet_vs_pytorch.sh [--steps S] [--build DIR] [--data DIR]
#
#   --steps S    training steps of batch 256 for each side (default 200)
#   --build DIR  Tandem build directory holding tools/tandem (default build, relative to
#                the repository root unless absolute)
#   --data DIR   Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# PyTorch is Debian's python3-torch under /usr/bin/python3, with OpenBLAS installed so that
# it runs at its best (apt-get install python3-torch libopenblas0-pthread).
set -euo pipefail

steps=200
build=build
data=""
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "lenet_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=lenet_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps
find_tools
batch=256

# --- PyTorch: S timed steps after 5 warm-up steps; its last line is machine readable.
pt_args=(--steps "$steps" --batch "$batch" --threads 2)
[[ -n "$data" ]] && pt_args+=(--data "$data")
echo "== PyTorch: $steps steps of batch $batch, 2 threads" >&2
"$python" "$here/pytorch_train.py" --model lenet "${pt_args[@]}" | tee "$TMP/pytorch.txt" >&2
pt_ips="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/.*images_per_s=\([0-9.eE+-]*\).*/\1/p')"
if [[ -z "$pt_ips" ]]; then
  echo "lenet_vs_pytorch: no images_per_s in PyTorch's last line" >&2
  exit 1
fi

# --- Tandem: one epoch over the first S*256 training examples on two CPU devices.
tandem_args=(train --model lenet --devices "cpu:0,cpu:1" --batch "$batch" --epochs 1
             --limit-train $((steps * batch)) --limit-test "$batch" --metrics "$TMP/m.csv")
[[ -n "$data" ]] && tandem_args+=(--data "$data")
echo "== Tandem: ${tandem_args[*]}" >&2
"$tandem" "${tandem_args[@]}" >&2
if [[ ! -s "$TMP/m.csv" ]]; then
  echo "lenet_vs_pytorch: tandem wrote no metrics to $TMP/m.csv" >&2
  exit 1
fi
# The column named images_per_s, from the last data row (the epoch just run).
tandem_ips="$(awk -F, '
  NR == 1 { for (i = 1; i <= NF; i++) { gsub(/[ \r"]/, "", $i); if ($i == "images_per_s") col = i } next }
  col && NF >= col { v = $col } END { gsub(/[ \r"]/, "", v); print v }' "$TMP/m.csv")"
if [[ -z "$tandem_ips" ]]; then
  echo "lenet_vs_pytorch: no images_per_s column/value in tandem's metrics CSV:" >&2
  cat "$TMP/m.csv" >&2
  exit 1
fi

awk -v pt="$pt_ips" -v td="$tandem_ips" -v steps="$steps" 'BEGIN {
  printf "pytorch images_per_s=%.1f\n", pt
  printf "tandem images_per_s=%.1f\n", td
  printf "ratio tandem/pytorch=%.3f steps=%d batch=256\n", td / pt, steps
}'
