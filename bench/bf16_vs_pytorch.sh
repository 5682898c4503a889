#!/usr/bin/env bash
# Mixed-precision training throughput on Fashion-MNIST, in one run: Tandem in f32 and with
# --precision bf16 on two CPU devices, PyTorch 1.13 and 2.6 eager and compiled in f32 and
# under torch.autocast("cpu", dtype=torch.bfloat16) on 2 threads (bench_common.sh's
# pytorch_best), all at one global batch for the same number of steps. Prints the images/s
# of each and the ratios against the fastest PyTorch of each precision.
#
#   bench/bf16_vs_pytorch.sh [--model M] [--steps S] [--batch B] [--build DIR] [--data DIR]
#
#   --model M    resnet18 (default) or lenet
#   --steps S    timed training steps for each side (default 20; 5 warm-up steps first)
#   --batch B    global batch (default 64 for resnet18, 256 for lenet)
#   --build DIR  Tandem build directory holding tools/tandem (default build)
#   --data DIR   Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# PyTorch 1.13 is Debian's python3-torch under /usr/bin/python3, with OpenBLAS installed
# (apt-get install python3-torch libopenblas0-pthread); PyTorch 2.6 ../shared/tools/pytorch2.
set -euo pipefail

model=resnet18 steps=20 batch="" build=build data=""
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="${2:?--model needs a value}"; shift 2 ;;
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bf16_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case "$model" in
  resnet18) batch="${batch:-64}" ;;
  lenet) batch="${batch:-256}" ;;
  *) echo "bf16_vs_pytorch: --model must be resnet18 or lenet, got '$model'" >&2; exit 2 ;;
esac
name=bf16_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps batch
find_tools
warmup=5

echo "== Tandem f32: $model, $steps steps of batch $batch on cpu:0,cpu:1" >&2
f32=$(tandem_rate "$model")
echo "== Tandem bf16 (--precision bf16)" >&2
bf16=$(tandem_rate "$model" --precision bf16)
echo "== PyTorch f32: $steps steps of batch $batch, 2 threads" >&2
pytorch_best "$model"
print_pytorch_rates
pt_f32=$pt_best pt_f32_name=$pt_best_name
echo "== PyTorch autocast bf16" >&2
pytorch_best "$model" --autocast bf16
printf 'autocast-bf16 '; print_pytorch_rates | paste -sd' '
pt_bf16=$pt_best pt_bf16_name=$pt_best_name

awk -v f="$f32" -v b="$bf16" -v pf="$pt_f32" -v pb="$pt_bf16" -v nf="$pt_f32_name" -v nb="$pt_bf16_name" \
    -v m="$model" -v steps="$steps" -v batch="$batch" 'BEGIN {
  printf "tandem f32 images_per_s=%.1f\ntandem bf16 images_per_s=%.1f\n", f, b
  printf "best pytorch f32 images_per_s=%.1f (%s)\nbest pytorch autocast-bf16 images_per_s=%.1f (%s)\n", pf, nf, pb, nb
  printf "ratio %s bf16/f32=%.3f bf16/best_pytorch_f32=%.3f bf16/best_pytorch_bf16=%.3f f32/best_pytorch_f32=%.3f steps=%d batch=%d\n", m, b / f, b / pf, b / pb, f / pf, steps, batch
}'
