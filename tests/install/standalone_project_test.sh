#!/usr/bin/env bash
# The installed package, as a user gets it: `cmake --install` into a temporary prefix, then
# examples/standalone copied into a temporary folder outside the tree, configured with
# find_package(Tandem) against that prefix alone, built, and run for one epoch on the first
# TRAIN_IMAGES Fashion-MNIST images. Passes when the program trains, reports a test
# accuracy above chance (0.1) by far, and its saved and loaded copy evaluates the same.
#
#   standalone_project_test.sh BUILD_DIR SOURCE_DIR DATA_DIR TRAIN_IMAGES CMAKE [CMAKE_ARGS...]
set -uo pipefail
build=$1 source=$2 data=$3 images=$4 cmake=$5
shift 5
source "$(dirname "$0")/install_test_lib.sh"
need_fashion_mnist "$data"
make_scratch tandem-standalone "standalone project"
step install "$cmake" --install "$build" --prefix "$scratch/prefix"
cp -r "$source/examples/standalone" "$scratch/project"
# Only the prefix: nothing of the tree or its build may be found.
step configure "$cmake" -S "$scratch/project" -B "$scratch/project/build" \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release "$@"
step build "$cmake" --build "$scratch/project/build"
cd "$scratch/project" || exit 1
step run ./build/fashion_classifier "$data" "$images"
out=$(cat "$scratch/run.log")
echo "$out"
trained=$(sed -n 's/^test accuracy \([0-9.]*\)$/\1/p' <<<"$out")
loaded=$(sed -n 's/^loaded from .*: test accuracy \([0-9.]*\)$/\1/p' <<<"$out")
if [[ -z $trained || -z $loaded ]]; then
  echo "standalone project: no test accuracy in its output"
  exit 1
fi
if ! awk -v a="$trained" 'BEGIN { exit !(a > 0.5) }'; then
  echo "standalone project: test accuracy $trained after one epoch: it did not learn (chance is 0.1)"
  exit 1
fi
if [[ $trained != "$loaded" ]]; then
  echo "standalone project: the loaded model evaluates to $loaded, the trained one to $trained"
  exit 1
fi
echo "standalone project: built against the installed package, trained to test accuracy $trained"
