#!/usr/bin/env bash
# Issue 42's bar: LeNet's images/s from Fashion-MNIST written as a PNG folder is at least
# 0.9x its images/s from the IDX files, on the same 2 devices. Writes the folder once (all
# 60,000 training and 10,000 test images, tests/runtime/write_image_folder.py), then trains
# one epoch from each, alternately, R rounds; prints each round's images/s, the medians and
# the ratio png/idx.
#
#   bench/png_vs_idx.sh [--tandem build/tools/tandem] [--folder /tmp/tandem_fmnist_png]
#                       [--rounds 3] [--devices cpu:0,cpu:1]
set -euo pipefail

tandem=build/tools/tandem folder=/tmp/tandem_fmnist_png rounds=3 devices=cpu:0,cpu:1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tandem) tandem="${2:?--tandem needs a value}"; shift 2 ;;
    --folder) folder="${2:?--folder needs a value}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --devices) devices="${2:?--devices needs a value}"; shift 2 ;;
    *) echo "png_vs_idx: unknown argument '$1'" >&2; sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
fmnist=/usr/share/datasets/fashion-mnist
here=$(cd "$(dirname "$0")/.." && pwd)
if [[ ! -d $folder/test ]]; then
  echo "writing $folder (70,000 PNG files) ..." >&2
  /usr/bin/python3 "$here/tests/runtime/write_image_folder.py" "$fmnist" "$folder"
fi

# images/s of one epoch (the table's last column) from the data the arguments name.
rate() {
  "$tandem" train --model lenet --devices "$devices" --batch 256 --epochs 1 --seed 1 "$@" |
    awk '$1 == "1" { print $NF }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

idx=() png=()
for ((r = 1; r <= rounds; r++)); do
  a=$(rate --data "$fmnist")
  b=$(rate --data "images:$folder/train:by-name" --test-data "images:$folder/test:by-name")
  echo "round $r: idx $a images/s, png $b images/s"
  idx+=("$a") png+=("$b")
done
mi=$(printf '%s\n' "${idx[@]}" | median)
mp=$(printf '%s\n' "${png[@]}" | median)
awk -v i="$mi" -v p="$mp" 'BEGIN { printf "median: idx %.0f, png %.0f images/s; png/idx %.3f (bar: >= 0.9)\n", i, p, p / i }'
