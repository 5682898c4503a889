# Shared set-up of the bench/*_vs_pytorch.sh and resnet18_curve.sh scripts: sourced after
# their own argument parsing, with $name (the script's name for messages) and $build set.
#
#   require_positive_ints VAR...   each variable a positive integer, else exit 2
#   text_into_tmp FILE             $TMP/text.txt: FILE's copy, or the KJV (scripts/kjv-text)
#                                  when FILE is empty (the GPT scripts; under /tmp, which
#                                  pytorch2's root sees)
#   find_tools                     sets here, root, build (absolute), python (one that
#                                  imports torch), tandem and a TMP directory removed on
#                                  exit; a missing piece is exit 1 saying how to get it
#   tandem_rate MODEL [FLAG...]    images/s of $steps timed training steps of batch $batch
#                                  on cpu:0,cpu:1 after $warmup warm-up steps ($data if set)
#   pytorch_rate MODEL [FLAG...]   the same for bench/pytorch_train.py on 2 threads
#   pytorch_rate_blas MODEL [FLAG...]
#                                  pytorch_rate with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE as set
#                                  and with both unset (where any is set): the final losses
#                                  must agree; prints the faster rate
#
# Both sides train with the lesson's N(0, 0.01) initialization and PyTorch with SGD lr 0.1,
# unless the caller sets model_recipe=1: then each side uses the model's own initializer,
# optimizer and schedule (Tandem's zoo defaults, pytorch_train.py's RECIPES).

require_positive_ints() {
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
      echo "$name: --${v//_/-} must be a positive integer, got '${!v}'" >&2
      exit 2
    }
  done
}

text_into_tmp() {
  if [[ -n "$1" ]]; then
    [[ -f "$1" ]] || { echo "$name: --text $1: no such file" >&2; exit 1; }
    cp "$1" "$TMP/text.txt"
  else
    echo "== the KJV text: scripts/kjv-text" >&2
    "$root/scripts/kjv-text" "$TMP/text.txt"
  fi
}

find_tools() {
  here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
  root="$(dirname "$here")"
  [[ "$build" = /* ]] || build="$root/$build"
  python="${TANDEM_PYTHON:-/usr/bin/python3}"  # the interpreter python3-torch serves
  "$python" -c "import torch" >/dev/null 2>&1 || {
    echo "$name: $python cannot import torch; install it with: apt-get install python3-torch libopenblas0-pthread" >&2
    exit 1
  }
  tandem="$build/tools/tandem"
  [[ -x "$tandem" ]] || {
    echo "$name: $tandem not found; build it with: ninja -C $build tandem (or pass --build DIR)" >&2
    exit 1
  }
  TMP="$(mktemp -d)"
  trap 'rm -rf "$TMP"' EXIT
}

# Tandem's images/s over the timed steps only: an epoch of warm-up + timed steps and one of
# the warm-up steps alone, each measured by the trainer; the difference is the timed part.
tandem_rate() {
  local model="$1"; shift
  local args=(train --model "$model" --devices cpu:0,cpu:1 --batch "$batch" --epochs 1
              --limit-test "$batch")
  [[ -n "${model_recipe:-}" ]] || args+=(--init normal:0.01)
  [[ -n "${data:-}" ]] && args+=(--data "$data")
  # A failed run must stop the script: `set -e` does not reach into $(tandem_rate ...).
  rm -f "$TMP/all.csv" "$TMP/warm.csv"
  "$tandem" "${args[@]}" --limit-train $(((warmup + steps) * batch)) --metrics "$TMP/all.csv" "$@" >&2 ||
    { echo "$name: tandem train failed (see above)" >&2; exit 1; }
  "$tandem" "${args[@]}" --limit-train $((warmup * batch)) --metrics "$TMP/warm.csv" "$@" >&2 ||
    { echo "$name: tandem train failed (see above)" >&2; exit 1; }
  awk -F, -v images=$((steps * batch)) 'FNR == 2 { s[FILENAME] = $6 }
    END { for (f in s) if (f ~ /all.csv/) a = s[f]; else w = s[f]; printf "%.1f\n", images / (a - w) }' \
    "$TMP/all.csv" "$TMP/warm.csv"
}

# PyTorch's images/s from bench/pytorch_train.py's last line (5 warm-up steps, then $steps).
# The whole line stays in $TMP/pytorch.txt. pytorch_unset_blas=1: with OPENBLAS_* unset.
pytorch_rate() {
  local model="$1"; shift
  local args=(--model "$model" --steps "$steps" --batch "$batch" --threads 2)
  [[ -n "${model_recipe:-}" ]] || args+=(--init normal:0.01 --lr 0.1)
  [[ -n "${data:-}" ]] && args+=(--data "$data")
  local run=("$python")
  [[ -n "${pytorch_unset_blas:-}" ]] && run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$python")
  "${run[@]}" "$here/pytorch_train.py" "${args[@]}" "$@" | tee "$TMP/pytorch.txt" >&2
  local rate
  rate="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/.*images_per_s=\([0-9.eE+-]*\).*/\1/p')"
  [[ -n "$rate" ]] || { echo "$name: no images_per_s from PyTorch" >&2; exit 1; }
  echo "$rate"
}

# The team's rule for PyTorch on this machine: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (set
# in its environment) may speed OpenBLAS up or slow it down, so time PyTorch both ways, check
# that the two runs computed the same (final loss within 1 %: the same seed, data and
# dropout masks; only OpenBLAS's kernels differ) and compare against the faster.
pytorch_rate_blas() {
  local with without loss_with loss_without
  with="$(pytorch_rate "$@")"
  if [[ -z "${OPENBLAS_CORETYPE:-}${OPENBLAS_L2_SIZE:-}" ]]; then
    echo "$with"
    return
  fi
  loss_with="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/.* loss=\([0-9.eE+-]*\).*/\1/p')"
  echo "== PyTorch again without OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-}" >&2
  without="$(pytorch_unset_blas=1 pytorch_rate "$@")"
  loss_without="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/.* loss=\([0-9.eE+-]*\).*/\1/p')"
  awk -v a="$loss_with" -v b="$loss_without" -v n="$name" 'BEGIN {
    d = a - b; if (d < 0) d = -d; m = (a > b ? a : b)
    if (a == "" || b == "" || d > 0.01 * m) {
      printf "%s: PyTorch with and without the OPENBLAS_* settings disagree: final loss %s against %s\n", n, a, b > "/dev/stderr"
      exit 1
    }
    printf "pytorch final loss %s (OPENBLAS_* set) and %s (unset): agree\n", a, b > "/dev/stderr"
  }' || exit 1
  echo "pytorch images_per_s with OPENBLAS_*=$with without=$without" >&2
  awk -v a="$with" -v b="$without" 'BEGIN { printf "%s\n", (a > b ? a : b) }'
}
