#!/usr/bin/env bash
# Multi-process against one process on this machine (docs/PERF.md, "Multi-process (issue
# 12)"): training images/s of LeNet and ResNet-18 for 1 process x 2 devices and for
# 2 processes x 1 device (mpirun), and one 25 MiB all_reduce bucket through the local
# communicator and through the communicator across processes (MPI).
#
#   bench/mpi_train.sh [--build DIR] [--lenet-images N] [--resnet-images N]
#
# Each training run is one epoch over the first N images (after the first step, which the
# epoch's images/s includes: compare the two columns, not with other tables), at batch 256.
set -euo pipefail
name=mpi_train.sh
build=build
lenet_images=12800
resnet_images=1024
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --lenet-images) lenet_images="$2"; shift 2 ;;
    --resnet-images) resnet_images="$2"; shift 2 ;;
    *) echo "$name: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for v in lenet_images resnet_images; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$name: --${v//_/-} must be a positive integer" >&2; exit 2; }
done
root="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$build" = /* ]] || build="$root/$build"
tandem="$build/tools/tandem"
bench="$build/bench/mpi_allreduce_bench"
for f in "$tandem" "$bench"; do
  [[ -x "$f" ]] || { echo "$name: $f is missing; build it: cmake --build $build --target tandem mpi_allreduce_bench" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "$name: mpirun is missing (scripts/setup installs openmpi-bin)" >&2; exit 1; }
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)

# images/s of the epoch row of a train run's table
rate() { awk '/train_loss/ {t=1; next} t && NF >= 6 {print $6; exit}'; }

printf '%-10s %22s %22s\n' model "1 process x 2 devices" "2 processes x 1 device"
for model in lenet resnet18; do
  n=$lenet_images; [[ $model = resnet18 ]] && n=$resnet_images
  args=(train --model "$model" --batch 256 --epochs 1 --seed 1 --limit-train "$n" --limit-test 256)
  one=$("$tandem" "${args[@]}" --devices cpu:0,cpu:1 | rate)
  two=$("${mpi[@]}" "$tandem" "${args[@]}" --devices cpu:0 | rate)
  printf '%-10s %18s img/s %18s img/s\n' "$model" "$one" "$two"
done
"$bench" 25 20
"${mpi[@]}" "$bench" 25 20
