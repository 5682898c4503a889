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
#   pytorch_best MODEL [FLAG...]   (not in $(...): it sets variables) pytorch_rate of
#                                  PyTorch 1.13 and of PyTorch 2.6 eager and compiled
#                                  (../shared/tools/pytorch2), each at its best on the 2
#                                  threads; sets pt_113, pt_26, pt_26c, pt_best, pt_best_name
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
  # PyTorch runs from the repository root (pytorch_rate): a relative --data made absolute.
  if [[ -n "${data:-}" && "$data" != /* ]]; then data="$PWD/$data"; fi
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
  # pytorch_run: another interpreter command (PyTorch 2's root), run from the repository
  # root, which that root sees under the same path.
  [[ -n "${pytorch_run:-}" ]] && read -ra run <<<"$pytorch_run"
  (cd "$root" && "${run[@]}" "$here/pytorch_train.py" "${args[@]}" "$@") | tee "$TMP/pytorch.txt" >&2
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

# PyTorch at its fastest on these 2 threads, in one run: 1.13 (Debian 12's python3-torch)
# and 2.6 eager and torch.compile'd (Debian 13's, through ../shared/tools/pytorch2), each
# with OPENBLAS_NUM_THREADS=1 and OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset: else
# OpenBLAS's own pthreads fight PyTorch's OpenMP threads for the cores (PyTorch's LeNet
# ran at half its speed so). Where pytorch2 is missing, 1.13 alone (said on stderr).
pytorch_best() {
  echo "== PyTorch 1.13: OPENBLAS_NUM_THREADS=1" >&2
  pt_113=$(OPENBLAS_NUM_THREADS=1 pytorch_unset_blas=1 pytorch_rate "$@")
  pt_26="" pt_26c=""
  local pytorch2="$root/../shared/tools/pytorch2"
  if [[ -x "$pytorch2" ]]; then
    echo "== PyTorch 2.6 eager (pytorch2): OPENBLAS_NUM_THREADS=1" >&2
    pt_26=$(pytorch_run="$pytorch2 env OPENBLAS_NUM_THREADS=1 python3" pytorch_rate "$@")
    echo "== PyTorch 2.6 compiled (torch.compile; its compilation in the warm-up steps)" >&2
    pt_26c=$(pytorch_run="$pytorch2 env OPENBLAS_NUM_THREADS=1 python3" pytorch_rate "$@" --compile)
  else
    echo "$name: $pytorch2 not found: PyTorch 2 not measured" >&2
  fi
  read -r pt_best pt_best_name < <(awk -v a="$pt_113" -v b="$pt_26" -v c="$pt_26c" 'BEGIN {
    best = a; n = "pytorch-1.13"
    if (b != "" && b + 0 > best + 0) { best = b; n = "pytorch-2.6-eager" }
    if (c != "" && c + 0 > best + 0) { best = c; n = "pytorch-2.6-compiled" }
    print best, n }')
}

# The lines every comparison prints for pytorch_best's figures: each PyTorch's images/s.
print_pytorch_rates() {
  printf 'pytorch-1.13 images_per_s=%s\npytorch-2.6-eager images_per_s=%s\npytorch-2.6-compiled images_per_s=%s\n' \
    "$pt_113" "${pt_26:-n/a}" "${pt_26c:-n/a}"
}
