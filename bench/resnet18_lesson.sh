#!/usr/bin/env bash
# The lesson's ResNet-18 row in full (issue 46): ResNet-18 on all of Fashion-MNIST for 10
# epochs with the lesson's recipe (N(0, 0.01) initialization, SGD without momentum or weight
# decay), on one device at batch 256, lr 0.1 (cpu:0 with both cores: --threads-per-device 2)
# and on two at batch 512, lr 0.2 (cpu:0,cpu:1), and PyTorch 2.6 compiled with the first
# recipe on the same 2 threads (../shared/tools/pytorch2), stopped at the first epoch that
# reaches the target (its time to accuracy needs no more). Prints each run's epoch lines,
# its seconds per epoch and its time to a test accuracy (DAWNBench's time to accuracy: the
# training seconds summed until the first epoch that reaches it; evaluation not counted).
#
#   bench/resnet18_lesson.sh [--runs one,two,pytorch] [--epochs E] [--target A]
#                            [--limit-train N] [--build DIR] [--data DIR]
#
#   --runs R          which runs, comma-separated (default one,two,pytorch)
#   --epochs E        epochs (default 10)
#   --target A        the test accuracy timed (default 0.90)
#   --limit-train N   first N training images (default: all 60,000; for a quick check)
#   --build DIR       Tandem build directory holding tools/tandem (default build)
#   --data DIR        Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# Hours of the 2 cores: one run takes about as long as 10 x 60,000 images at its images/s.
set -euo pipefail

runs=one,two,pytorch epochs=10 target=0.90 limit_train=0 build=build data=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a value}"; shift 2 ;;
    --epochs) epochs="${2:?--epochs needs a value}"; shift 2 ;;
    --target) target="${2:?--target needs a value}"; shift 2 ;;
    --limit-train) limit_train="${2:?--limit-train needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "resnet18_lesson: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=resnet18_lesson
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints epochs
[[ $limit_train =~ ^[0-9]+$ ]] || { echo "$name: --limit-train must be a count, got '$limit_train'" >&2; exit 2; }
[[ $target =~ ^0?\.[0-9]+$ ]] || { echo "$name: --target must be an accuracy in (0, 1), got '$target'" >&2; exit 2; }
find_tools

recipe=(--init normal:0.01 --momentum 0 --weight-decay 0 --epochs "$epochs")
((limit_train > 0)) && recipe+=(--limit-train "$limit_train")
[[ -n "$data" ]] && recipe+=(--data "$data")

# One run's table from CSV lines epoch,train_loss,train_acc,test_loss,test_acc,seconds,...:
# its epochs, mean seconds per epoch and the time to the target.
report() {
  awk -F, -v label="$1" -v target="$target" 'NR > 1 || $1 ~ /^[0-9]/ {
      if ($1 !~ /^[0-9]/) next
      total += $6; n++
      printf "%s epoch %2d train_loss %.4f train_acc %.4f test_acc %.4f seconds %.1f\n", label, $1, $2, $3, $5, $6
      if (!reached && $5 + 0 >= target + 0) { reached = $1; at = total }
    }
    END {
      printf "%s seconds_per_epoch=%.1f ", label, total / n
      if (reached) printf "time_to_%s=%.1f s (epoch %d)\n", target, at, reached
      else printf "time_to_%s=not reached in %d epochs\n", target, n
    }' "$2"
}

IFS=, read -ra wanted <<<"$runs"
for run in "${wanted[@]}"; do
  case "$run" in
    one)
      echo "== Tandem, one device (cpu:0, 2 threads), batch 256, lr 0.1" >&2
      "$tandem" train --model resnet18 --devices cpu:0 --threads-per-device 2 --batch 256 \
        --lr 0.1 "${recipe[@]}" --metrics "$TMP/one.csv" >&2
      report tandem-1-device "$TMP/one.csv" ;;
    two)
      echo "== Tandem, two devices (cpu:0,cpu:1), batch 512, lr 0.2" >&2
      "$tandem" train --model resnet18 --devices cpu:0,cpu:1 --batch 512 --lr 0.2 \
        "${recipe[@]}" --metrics "$TMP/two.csv" >&2
      report tandem-2-devices "$TMP/two.csv" ;;
    pytorch)
      pytorch2="$root/../shared/tools/pytorch2"
      [[ -x "$pytorch2" ]] || { echo "$name: $pytorch2 not found: no PyTorch 2 run" >&2; exit 1; }
      echo "== PyTorch 2.6 compiled, 2 threads, batch 256, lr 0.1" >&2
      (cd "$root" && "$pytorch2" env OPENBLAS_NUM_THREADS=1 python3 "$here/pytorch_train.py" \
        --model resnet18 --threads 2 --batch 256 --lr 0.1 --eval --compile --stop-at "$target" \
        "${recipe[@]}") |
        tee "$TMP/pytorch.txt" >&2
      # Its lines: epoch E train_loss=L train_acc=A seconds=S images_per_s=R test_acc=T.
      sed -n 's/^epoch \([0-9]*\) train_loss=\([^ ]*\) train_acc=\([^ ]*\) seconds=\([^ ]*\) .*test_acc=\([^ ]*\).*/\1,\2,\3,0,\5,\4/p' \
        "$TMP/pytorch.txt" > "$TMP/pytorch.csv"
      [[ -s "$TMP/pytorch.csv" ]] || { echo "$name: PyTorch printed no epoch lines" >&2; exit 1; }
      report pytorch-2.6-compiled "$TMP/pytorch.csv" ;;
    *) echo "$name: --runs: '$run' is not one, two or pytorch" >&2; exit 2 ;;
  esac
done
