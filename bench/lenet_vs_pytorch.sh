#!/usr/bin/env bash
# Training throughput of LeNet on Fashion-MNIST, PyTorch 1.13 and 2.6 eager and compiled
# (CPU, 2 threads) against Tandem (two CPU devices, data parallel), all at batch 256, each
# over S timed steps after 5 warm-up steps, in R rounds that each time all four (PyTorch
# first in the odd rounds, Tandem first in the even ones: both sides see the same minutes
# of a noisy machine). Prints each round's images/s and ratio, then each configuration's
# best over the rounds, the ratio of Tandem's best to the fastest PyTorch's best, and the
# median of the rounds' ratios (each round's Tandem over that round's fastest PyTorch).
#
#   bench/lenet_vs_pytorch.sh [--steps S] [--rounds R] [--build DIR] [--data DIR]
#
#   --steps S    training steps of batch 256 for each side (default 200)
#   --rounds R   rounds, each timing all four configurations (default 3)
#   --build DIR  Tandem build directory holding tools/tandem (default build, relative to
#                the repository root unless absolute)
#   --data DIR   Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# PyTorch 1.13 is Debian's python3-torch under /usr/bin/python3, with OpenBLAS installed
# (apt-get install python3-torch libopenblas0-pthread); PyTorch 2.6 ../shared/tools/pytorch2.
set -euo pipefail

steps=200
rounds=3
build=build
data=""
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "lenet_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=lenet_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps rounds
find_tools
batch=256
# Both sides with the model's own recipe; 5 warm-up steps left out of the timing on both.
model_recipe=1
warmup=5

# --- PyTorch 1.13 and 2.6 eager and compiled: S timed steps after 5 warm-up steps, each
# at its best (bench_common.sh's pytorch_best).
pytorch_side() {
  echo "== PyTorch: $steps steps of batch $batch, 2 threads" >&2
  pytorch_best lenet
  keep_pytorch_rates
}

# --- Tandem on two CPU devices: its timed steps alone, as PyTorch's: the trainer's seconds
# of 5 + S steps less those of 5 (tandem_rate).
tandem_side() {
  echo "== Tandem: train --model lenet --devices cpu:0,cpu:1 --batch $batch, $warmup warm-up + $steps steps" >&2
  local rate
  rate="$(tandem_rate lenet)"  # an assignment alone: a failed run stops the script
  keep_rate tandem "$rate"
}

round_end() { keep_round_ratio tandem; }

run_rounds "$rounds" pytorch_side tandem_side round_end

# --- Each configuration's best over the rounds (interference only slows a run down), in
# the format of a single run, then the median of the rounds' ratios.
echo "== best of $rounds rounds" >&2
best_pytorch_rates
print_pytorch_rates
ratio_median="$(median "${round_ratios[@]}")"
awk -v pt="$pt_best" -v pn="$pt_best_name" -v td="${best_rate[tandem]}" -v steps="$steps" \
    -v rounds="$rounds" -v med="$ratio_median" 'BEGIN {
  printf "tandem images_per_s=%.1f\n", td
  printf "ratio tandem/best-pytorch=%.3f best=%s steps=%d batch=256 rounds=%d\n", td / pt, pn, steps, rounds
  printf "ratio median-of-rounds=%.3f\n", med
}'
