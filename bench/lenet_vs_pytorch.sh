#!/usr/bin/env bash
# Training throughput of LeNet on Fashion-MNIST, PyTorch 1.13 and 2.6 eager and compiled
# (CPU, 2 threads) against Tandem (two CPU devices, data parallel), all at batch 256, each
# over S timed steps after 5 warm-up steps; prints each images/s and the ratio against the
# fastest PyTorch.
#
#   bench/lenet_vs_pytorch.sh [--steps S] [--build DIR] [--data DIR]
#
#   --steps S    training steps of batch 256 for each side (default 200)
#   --build DIR  Tandem build directory holding tools/tandem (default build, relative to
#                the repository root unless absolute)
#   --data DIR   Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# PyTorch 1.13 is Debian's python3-torch under /usr/bin/python3, with OpenBLAS installed
# (apt-get install python3-torch libopenblas0-pthread); PyTorch 2.6 ../shared/tools/pytorch2.
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

# --- PyTorch 1.13 and 2.6 eager and compiled: S timed steps after 5 warm-up steps, each
# at its best (bench_common.sh's pytorch_best), with the model's own recipe.
model_recipe=1
echo "== PyTorch: $steps steps of batch $batch, 2 threads" >&2
pytorch_best lenet

# --- Tandem on two CPU devices: its timed steps alone, as PyTorch's (5 warm-up steps left
# out on both sides): the trainer's seconds of 5 + S steps less those of 5 (tandem_rate).
warmup=5
echo "== Tandem: train --model lenet --devices cpu:0,cpu:1 --batch $batch, $warmup warm-up + $steps steps" >&2
tandem_ips="$(tandem_rate lenet)"

print_pytorch_rates
awk -v pt="$pt_best" -v pn="$pt_best_name" -v td="$tandem_ips" -v steps="$steps" 'BEGIN {
  printf "tandem images_per_s=%.1f\n", td
  printf "ratio tandem/best-pytorch=%.3f best=%s steps=%d batch=256\n", td / pt, pn, steps
}'
