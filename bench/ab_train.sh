#!/usr/bin/env bash
# Training throughput of two tandem binaries in one run (a change against its base): each
# trains a model (LeNet by default) on Fashion-MNIST for one epoch on two CPU devices,
# alternately, R rounds; prints each round's images/s, the medians and the ratio new/old.
# Rounds alternate which binary goes first (the second of a pair measured ~3 % slower,
# whichever it was), and the medians spread the shared machine's noise over both sides.
#
#   bench/ab_train.sh OLD_TANDEM NEW_TANDEM [--rounds R] [--limit-train N] [--devices D]
#                     [--model M] [--extra 'ARGS']   (ARGS: more train flags, both runs)
#
# Example: build the base commit into /tmp/base, then
#   bench/ab_train.sh /tmp/base/build/tools/tandem build/tools/tandem --rounds 5
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
old=$1 new=$2
shift 2
rounds=5 limit=30000 devices=cpu:0,cpu:1 model=lenet extra=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --limit-train) limit="${2:?--limit-train needs a value}"; shift 2 ;;
    --devices) devices="${2:?--devices needs a value}"; shift 2 ;;
    --model) model="${2:?--model needs a value}"; shift 2 ;;
    --extra) extra="${2?--extra needs a value}"; shift 2 ;;
    *) echo "ab_train: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for b in "$old" "$new"; do
  [[ -x $b ]] || { echo "ab_train: $b is not an executable tandem" >&2; exit 2; }
done

# images/s of one epoch (the table's column of that name).
rate() {
  # shellcheck disable=SC2086 # --extra's flags are meant to split
  "$1" train --model "$model" --devices "$devices" --batch 256 --epochs 1 --limit-train "$limit" \
    --limit-test 256 --seed 1 $extra |
    awk '$1 == "epoch" { for (i = 1; i <= NF; i++) if ($i == "images/s") col = i }
         $1 == "1" && col { gsub(",", "", $col); print $col }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

olds=() news=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then
    o=$(rate "$old")
    n=$(rate "$new")
  else
    n=$(rate "$new")
    o=$(rate "$old")
  fi
  olds+=("$o")
  news+=("$n")
  printf 'round %d: old %s images/s, new %s images/s\n' "$r" "$o" "$n"
done
mo=$(printf '%s\n' "${olds[@]}" | median)
mn=$(printf '%s\n' "${news[@]}" | median)
awk -v o="$mo" -v n="$mn" 'BEGIN { printf "median: old %.0f, new %.0f images/s; new/old = %.3f\n", o, n, n / o }'
