#!/usr/bin/env bash
# ResNet-18 training throughput on Fashion-MNIST, in one run: Tandem with fusion, Tandem
# without (--no-fuse), both on two CPU devices, and PyTorch 1.13 and 2.6 eager and compiled
# on 2 threads (bench_common.sh's pytorch_best: OPENBLAS_NUM_THREADS=1), all at one global
# batch for the same number of steps. Prints the images/s of each and the ratios against
# the fastest PyTorch.
#
#   bench/resnet18_vs_pytorch.sh [--steps S] [--batch B] [--build DIR] [--data DIR]
#
#   --steps S    timed training steps for each side (default 20; 5 warm-up steps first)
#   --batch B    global batch (default 64: 32 per Tandem device)
#   --build DIR  Tandem build directory holding tools/tandem (default build)
#   --data DIR   Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# PyTorch 1.13 is Debian's python3-torch under /usr/bin/python3, with OpenBLAS installed
# (apt-get install python3-torch libopenblas0-pthread); PyTorch 2.6 ../shared/tools/pytorch2.
set -euo pipefail

steps=20 batch=64 build=build data=""
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "resnet18_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=resnet18_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps batch
find_tools
warmup=5

echo "== Tandem fused: $steps steps of batch $batch on cpu:0,cpu:1" >&2
fused=$(tandem_rate resnet18)
echo "== Tandem unfused (--no-fuse)" >&2
unfused=$(tandem_rate resnet18 --no-fuse)
echo "== PyTorch: $steps steps of batch $batch, 2 threads" >&2
pytorch_best resnet18

print_pytorch_rates
awk -v f="$fused" -v u="$unfused" -v p="$pt_best" -v pn="$pt_best_name" -v steps="$steps" -v batch="$batch" 'BEGIN {
  printf "tandem fused images_per_s=%.1f\ntandem unfused images_per_s=%.1f\n", f, u
  printf "ratio fused/best-pytorch=%.3f fused/unfused=%.3f unfused/best-pytorch=%.3f best=%s steps=%d batch=%d\n", f / p, f / u, u / p, pn, steps, batch
}'
