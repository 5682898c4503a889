#!/usr/bin/env bash
# Training throughput with and without --shard-updates (issue 27) in one run: per model
# (lenet, resnet18, vit) one epoch of LIMIT Fashion-MNIST images on two CPU devices, the
# replicated update then the sharded one; prints both images/s, their ratio, and whether
# the two epoch lines (loss, accuracies) agree, as they must bit for bit.
#
#   bench/shard_updates.sh [TANDEM] [--limit-train N] [--devices D] [--models "lenet vit"]
#
# Measure on a quiet machine: each pair runs back to back, so the ratio is within one run.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
tandem=build/tools/tandem
[[ $# -gt 0 && $1 != --* ]] && { tandem=$1; shift; }
limit=5120 devices=cpu:0,cpu:1 models="lenet resnet18 vit"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --limit-train) limit="${2:?--limit-train needs a value}"; shift 2 ;;
    --devices) devices="${2:?--devices needs a value}"; shift 2 ;;
    --models) models="${2:?--models needs a value}"; shift 2 ;;
    *) echo "shard_updates: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -x $tandem ]] || { echo "shard_updates: $tandem is not an executable tandem" >&2; exit 2; }

# The epoch line of one run (epoch, loss, accuracies, seconds, images/s, lr when scheduled).
epoch() {
  local model=$1
  shift
  # vit's default warmup is one epoch, which would leave a one-epoch cosine no steps.
  local extra=()
  [[ $model == vit ]] && extra=(--warmup 2)
  "$tandem" train --model "$model" --devices "$devices" --batch 256 --epochs 1 \
    --limit-train "$limit" --limit-test 256 --seed 1 "${extra[@]}" "$@" | awk '$1 == "1"'
}

printf '%-9s %14s %14s %8s %s\n' model replicated sharded ratio same-figures
for model in $models; do
  plain=$(epoch "$model")
  sharded=$(epoch "$model" --shard-updates)
  p=$(awk '{ print $6 }' <<<"$plain")
  s=$(awk '{ print $6 }' <<<"$sharded")
  same=no
  [[ $(awk '{ print $2, $3, $4 }' <<<"$plain") == $(awk '{ print $2, $3, $4 }' <<<"$sharded") ]] &&
    same=yes
  awk -v m="$model" -v p="$p" -v s="$s" -v same="$same" \
    'BEGIN { printf "%-9s %10s img/s %8s img/s %8.3f %s\n", m, p, s, s / p, same }'
done
