#!/usr/bin/env bash
# The public API as a user gets it: `cmake --install` into a temporary prefix, then
#  1. the installed headers: one that includes a header of the tree that is not installed
#     (not in TANDEM_PUBLIC_HEADERS) fails here, and they must compile against the prefix;
#  2. examples/ and examples/standalone copied outside the tree, configured with
#     find_package(Tandem) against the prefix alone (their compile commands name nothing
#     of the tree or its build) and built: an example that includes a header that is not
#     installed fails here;
#  3. their programs run briefly: custom_model prints its compiled training step and
#     trains for one epoch on TRAIN_IMAGES images, fashion_classifier trains, saves and
#     loads on as many, diabetes_regression trains one epoch (where python3-sklearn's
#     data and numpy are).
#
#   examples_test.sh BUILD_DIR SOURCE_DIR DATA_DIR TRAIN_IMAGES CMAKE [CMAKE_ARGS...]
set -uo pipefail
build=$(realpath "$1") source=$(realpath "$2") data=$3 images=$4 cmake=$5
shift 5
source "$(dirname "$0")/install_test_lib.sh"
need_fashion_mnist "$data"
make_scratch tandem-examples "installed examples"
# configure NAME DIR: a project against the prefix alone, then built.
configure_and_build() {
  local name=$1 dir=$2
  step "configure_$name" "$cmake" -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${cmake_args[@]}"
  if grep -qF -e "$source" -e "$build" "$dir/build/compile_commands.json"; then
    echo "installed examples: $name compiles with a path of Tandem's tree or build:"
    grep -oF -e "$source" -e "$build" "$dir/build/compile_commands.json" | sort -u
    exit 1
  fi
  step "build_$name" "$cmake" --build "$dir/build"
}
cmake_args=("$@")

step install "$cmake" --install "$build" --prefix "$scratch/prefix"

# 1. The installed headers: every include of ours in one (a path under a top-level folder
#    of the tree, "ir/ir.h") is installed too, and together they compile against the
#    install alone.
include_root=$scratch/prefix/include/tandem
headers=$(cd "$include_root" && find . -name '*.h' | sed 's|^\./||' | sort)
if [[ -z $headers ]]; then
  echo "installed examples: no headers under $include_root"
  exit 1
fi
missing=0
for h in $headers; do
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
    "$include_root/$h"); do
    if [[ $inc == */* && -d $source/${inc%%/*} && ! -f $include_root/$inc ]]; then
      echo "installed examples: the installed header $h includes \"$inc\", which is not installed" \
        "(the public headers are TANDEM_PUBLIC_HEADERS in tandem/CMakeLists.txt)"
      missing=1
    fi
  done
done
[[ $missing == 0 ]] || exit 1
mkdir -p "$scratch/headers"
for h in $headers; do printf '#include "%s"\n' "$h"; done >"$scratch/headers/all_headers.cc"
cat >"$scratch/headers/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(tandem_public_headers LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(Tandem CONFIG REQUIRED)
add_library(public_headers OBJECT all_headers.cc)
target_link_libraries(public_headers PRIVATE Tandem::tandem)
CMAKE
configure_and_build headers "$scratch/headers"
echo "installed examples: the $(wc -w <<<"$headers") installed headers include only installed ones and compile"

# 2. The examples, from a copy outside the tree.
cp -r "$source/examples" "$scratch/examples"
rm -rf "$scratch/examples/build" "$scratch/examples/standalone/build"
configure_and_build examples "$scratch/examples"
configure_and_build standalone "$scratch/examples/standalone"

# 3. Brief runs, in a folder of their own (they write their checkpoints there).
mkdir -p "$scratch/run" && cd "$scratch/run" || exit 1
step print_step "$scratch/examples/build/custom_model" --print-step "$data"
if ! head -n 1 "$scratch/print_step.log" | grep -q '^graph @train_step(' ||
  ! tail -n 1 "$scratch/print_step.log" |
  grep -qE '^// tiny_vgg: [1-9][0-9]* all_reduce nodes in @train_step over cpu:0,cpu:1$'; then
  echo "installed examples: custom_model --print-step printed no training step and summary:"
  head -n 3 "$scratch/print_step.log"
  tail -n 3 "$scratch/print_step.log"
  exit 1
fi
step custom_model "$scratch/examples/build/custom_model" 1 "$images" "$data"
if ! grep -q '^epoch 1: ' "$scratch/custom_model.log" ||
  ! grep -q '^saved to custom_model.checkpoint$' "$scratch/custom_model.log"; then
  echo "installed examples: custom_model did not train an epoch and save it:"
  cat "$scratch/custom_model.log"
  exit 1
fi
step fashion_classifier "$scratch/examples/standalone/build/fashion_classifier" "$data" "$images"
if ! grep -q '^loaded from .*: test accuracy ' "$scratch/fashion_classifier.log"; then
  echo "installed examples: fashion_classifier did not train, save and load:"
  cat "$scratch/fashion_classifier.log"
  exit 1
fi
# diabetes_regression on scikit-learn's diabetes data (Debian python3-sklearn, and numpy to
# write its .npz files), one epoch.
sklearn_data=/usr/lib/python3/dist-packages/sklearn/datasets/data
if [[ -f $sklearn_data/diabetes_data_raw.csv.gz ]] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  step write_diabetes /usr/bin/python3 "$scratch/examples/write_diabetes_npz.py" "$sklearn_data" \
    "$scratch/diabetes"
  step diabetes_regression "$scratch/examples/build/diabetes_regression" --epochs 1 "$scratch/diabetes"
  if ! grep -q '^epoch 1: train loss ' "$scratch/diabetes_regression.log"; then
    echo "installed examples: diabetes_regression did not train an epoch:"
    cat "$scratch/diabetes_regression.log"
    exit 1
  fi
elif [[ ${TANDEM_TESTS_AFTER_SETUP:-} == 1 ]]; then
  echo "installed examples: $sklearn_data/diabetes_data_raw.csv.gz or numpy is missing (scripts/setup installs python3-sklearn)"
  exit 1
else
  echo "installed examples: diabetes_regression not run: no python3-sklearn data or numpy"
fi
echo "installed examples: examples/ and examples/standalone built against the installed package alone and ran"
