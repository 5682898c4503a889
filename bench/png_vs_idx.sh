#!/usr/bin/env bash
# Issue 42's bar: LeNet's images/s from Fashion-MNIST written as a PNG folder is at least
# 0.9x its images/s from the IDX files, on the same 2 devices. Writes the folder once (all
# 60,000 training and 10,000 test images, tests/runtime/write_image_folder.py), then trains
# three epochs from each, alternately, R rounds; prints each round's images/s, the medians
# and the ratios png/idx: of the first epoch (every file read and decoded) and of epochs 2
# and 3 (the folder's decoded pixels kept in memory, runtime/data/image_folder_source.h).
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

# images/s of epoch 1, and the mean of epochs 2 and 3 (the table's last column).
rates() {
  "$tandem" train --model lenet --devices "$devices" --batch 256 --epochs 3 --seed 1 "$@" |
    awk '$1 == "1" { first = $NF } $1 == "2" || $1 == "3" { later += $NF / 2 }
         END { print first, later }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

idx1=() idx2=() png1=() png2=()
for ((r = 1; r <= rounds; r++)); do
  read -r a1 a2 < <(rates --data "$fmnist")
  read -r b1 b2 < <(rates --data "images:$folder/train:by-name" --test-data "images:$folder/test:by-name")
  echo "round $r: epoch 1: idx $a1, png $b1 images/s; epochs 2-3: idx $a2, png $b2 images/s"
  idx1+=("$a1") idx2+=("$a2") png1+=("$b1") png2+=("$b2")
done
m() { printf '%s\n' "$@" | median; }
awk -v i1="$(m "${idx1[@]}")" -v p1="$(m "${png1[@]}")" -v i2="$(m "${idx2[@]}")" -v p2="$(m "${png2[@]}")" 'BEGIN {
  printf "median, epoch 1 (decoding every file): idx %.0f, png %.0f images/s; png/idx %.3f\n", i1, p1, p1 / i1
  printf "median, epochs 2-3 (decoded pixels kept): idx %.0f, png %.0f images/s; png/idx %.3f (bar: >= 0.9)\n", i2, p2, p2 / i2 }'
