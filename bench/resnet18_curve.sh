#!/usr/bin/env bash
# ResNet-18's learning curve on a Fashion-MNIST subset, Tandem (fused and --no-fuse, on two
# CPU devices) next to PyTorch 1.13 (2 threads) with the same data, initialization
# (normal:0.01, the lesson's), optimizer (SGD, lr 0.1, no momentum) and batch. Prints one
# table: per epoch, each side's train loss and test accuracy, and each side's images/s.
#
#   bench/resnet18_curve.sh [--epochs E] [--batch B] [--limit-train N] [--limit-test N]
#                           [--build DIR] [--data DIR]
#
#   --epochs E        epochs (default 2)
#   --batch B         global batch (default 256, the lesson's single-GPU batch)
#   --limit-train N   first N training images (default 15360)
#   --limit-test N    first N test images (default 2000)
#   --build DIR       Tandem build directory holding tools/tandem (default build)
#   --data DIR        Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# The sides shuffle with their own generators, so the curves agree in trend and level,
# not to the digit.
set -euo pipefail

epochs=2 batch=256 limit_train=15360 limit_test=2000 build=build data=""
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) epochs="${2:?--epochs needs a value}"; shift 2 ;;
    --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
    --limit-train) limit_train="${2:?--limit-train needs a value}"; shift 2 ;;
    --limit-test) limit_test="${2:?--limit-test needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "resnet18_curve: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=resnet18_curve
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints epochs batch limit_train limit_test
find_tools

common=(--batch "$batch" --limit-train "$limit_train" --limit-test "$limit_test" --lr 0.1)
tandem_args=(train --model resnet18 --devices cpu:0,cpu:1 --epochs "$epochs" --init normal:0.01
             --momentum 0 --weight-decay 0 "${common[@]}")
[[ -n "$data" ]] && tandem_args+=(--data "$data")
echo "== Tandem fused: ${tandem_args[*]}" >&2
"$tandem" "${tandem_args[@]}" --metrics "$TMP/fused.csv" >&2
echo "== Tandem unfused: --no-fuse" >&2
"$tandem" "${tandem_args[@]}" --no-fuse --metrics "$TMP/unfused.csv" >&2
pt_args=(--model resnet18 --init normal:0.01 --momentum 0 --threads 2 --epochs "$epochs" --eval "${common[@]}")
[[ -n "$data" ]] && pt_args+=(--data "$data")
echo "== PyTorch: ${pt_args[*]}" >&2
"$python" "$here/pytorch_train.py" "${pt_args[@]}" | tee "$TMP/pytorch.txt" >&2

# Tandem's CSV: epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,eval_seconds.
# PyTorch's lines: epoch E train_loss=L train_acc=A seconds=S images_per_s=R test_acc=T.
sed -n 's/^epoch \([0-9]*\) train_loss=\([^ ]*\) .*images_per_s=\([^ ]*\) test_acc=\([^ ]*\).*/\1,\2,0,0,\4,0,\3,0/p' \
  "$TMP/pytorch.txt" > "$TMP/pytorch.csv"
[[ $(wc -l < "$TMP/pytorch.csv") -eq $epochs ]] || { echo "resnet18_curve: PyTorch printed no per-epoch lines" >&2; exit 1; }
echo "ResNet-18, Fashion-MNIST train $limit_train / test $limit_test, batch $batch, lr 0.1, normal:0.01"
echo "epoch  fused_loss fused_test  unfused_loss unfused_test  pytorch_loss pytorch_test"
awk -F, 'FILENAME ~ /fused.csv$/ && FILENAME !~ /unfused/ && FNR > 1 { fl[$1] = $2; ft[$1] = $5; fr += $7; fn++ }
         FILENAME ~ /unfused.csv$/ && FNR > 1 { ul[$1] = $2; ut[$1] = $5; ur += $7; un++ }
         FILENAME ~ /pytorch.csv$/ { pl[$1] = $2; pt[$1] = $5; pr += $7; pn++; last = $1 }
  END {
    for (e = 1; e <= last; e++)
      printf "%5d  %10.4f %10.4f  %12.4f %12.4f  %12.4f %12.4f\n", e, fl[e], ft[e], ul[e], ut[e], pl[e], pt[e]
    printf "images_per_s fused=%.1f unfused=%.1f pytorch=%.1f (mean of the epochs)\n", fr / fn, ur / un, pr / pn
  }' "$TMP/fused.csv" "$TMP/unfused.csv" "$TMP/pytorch.csv"
