# Shared by the install tests (sourced): the data check, the scratch folder and `step`.

# Exits 77 (skipped) when Fashion-MNIST is not in DATA_DIR, 1 after scripts/setup ran.
need_fashion_mnist() {  # need_fashion_mnist DATA_DIR
  if [[ ! -f $1/train-images-idx3-ubyte.gz && ! -f $1/train-images-idx3-ubyte ]]; then
    echo "Fashion-MNIST is not in $1 (scripts/setup installs it)"
    [[ ${TANDEM_TESTS_AFTER_SETUP:-} == 1 ]] && exit 1
    exit 77  # skipped (SKIP_RETURN_CODE)
  fi
}

# Makes $scratch, a temporary folder removed when the script exits; LABEL starts a failed
# step's line.
make_scratch() {  # make_scratch NAME LABEL
  scratch=$(mktemp -d -t "$1.XXXXXX")
  step_label=$2
  trap 'rm -rf "$scratch"' EXIT
}

step() {  # step WHAT COMMAND...: runs it, its output in a log shown when it fails
  local what=$1 log=$scratch/$1.log
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "$step_label: $what failed: $*"
    tail -n 40 "$log"
    exit 1
  fi
}
