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
#   print_pytorch_rates            the lines "pytorch-1.13 images_per_s=..." (and 2.6 eager
#                                  and compiled, n/a where not measured) of pt_113, pt_26,
#                                  pt_26c
#   pytorch_fastest A B C          "RATE NAME" of the fastest of the images/s of PyTorch 1.13,
#                                  2.6 eager and 2.6 compiled (B and C may be empty)
#
# Interleaved rounds, against a machine whose neighbours slow either side by 10-30 % for
# stretches of tens of seconds (timeit's convention: interference only slows a run down, so
# each configuration's fastest run is its speed on a quiet machine). All but median set
# variables: not in $(...).
#
#   run_rounds R FIRST SECOND [END]
#                                  R rounds: the commands (functions) FIRST then SECOND in
#                                  the odd rounds, SECOND then FIRST in the even ones (each
#                                  side sees the same minutes of the machine), then END;
#                                  $round is the round's number (1..R) for them, round_rate
#                                  emptied at each round's start
#   keep_rate NAME RATE            one configuration's images/s in this round: prints "round
#                                  N NAME images_per_s=RATE" (n/a where RATE is empty) and
#                                  keeps it in round_rate[NAME] and, where faster than the
#                                  earlier rounds' (the max over the rounds), in best_rate[NAME]
#   keep_pytorch_rates             keep_rate of pytorch_best's three figures (pytorch-1.13,
#                                  pytorch-2.6-eager, pytorch-2.6-compiled)
#   keep_round_ratio NAME          prints "round N ratio NAME/best-pytorch=X.XXX best=PT":
#                                  round_rate[NAME] over this round's fastest PyTorch (needs
#                                  keep_pytorch_rates in the round); appends X to round_ratios
#   best_pytorch_rates             pytorch_best's variables from best_rate: each PyTorch's
#                                  best over the rounds, pt_best / pt_best_name the fastest
#                                  of those (then print_pytorch_rates prints the bests)
#   median NUMBER...               their median (of an even count, the mean of the middle two)
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
  read -r pt_best pt_best_name < <(pytorch_fastest "$pt_113" "$pt_26" "$pt_26c")
}

pytorch_fastest() {
  awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN {
    best = a; n = "pytorch-1.13"
    if (b != "" && b + 0 > best + 0) { best = b; n = "pytorch-2.6-eager" }
    if (c != "" && c + 0 > best + 0) { best = c; n = "pytorch-2.6-compiled" }
    print best, n }'
}

# The lines every comparison prints for pytorch_best's figures: each PyTorch's images/s.
print_pytorch_rates() {
  printf 'pytorch-1.13 images_per_s=%s\npytorch-2.6-eager images_per_s=%s\npytorch-2.6-compiled images_per_s=%s\n' \
    "$pt_113" "${pt_26:-n/a}" "${pt_26c:-n/a}"
}

# --- Interleaved rounds (the header's second list). round_rate: this round's images/s by
# configuration; best_rate: each one's fastest over the rounds; round_ratios: each round's
# keep_round_ratio. A failed run inside FIRST, SECOND or END stops the script: run_rounds
# calls them outside any `if`, `&&` or `||`, where `set -e` reaches them.
declare -gA round_rate=() best_rate=()
round_ratios=()
round=0

run_rounds() {
  local rounds="$1" first="$2" second="$3" end="${4:-}"
  for ((round = 1; round <= rounds; round++)); do
    round_rate=()
    if ((round % 2)); then
      echo "== round $round of $rounds: $first, then $second" >&2
      "$first"
      "$second"
    else
      echo "== round $round of $rounds: $second, then $first" >&2
      "$second"
      "$first"
    fi
    if [[ -n "$end" ]]; then "$end"; fi
  done
}

keep_rate() {
  local n="$1" rate="${2:-}"
  echo "round $round $n images_per_s=${rate:-n/a}"
  [[ -n "$rate" ]] || return 0
  round_rate[$n]="$rate"
  if [[ -z "${best_rate[$n]:-}" ]] ||
     awk -v a="$rate" -v b="${best_rate[$n]}" 'BEGIN { exit !(a + 0 > b + 0) }'; then
    best_rate[$n]="$rate"
  fi
}

keep_pytorch_rates() {
  keep_rate pytorch-1.13 "$pt_113"
  keep_rate pytorch-2.6-eager "${pt_26:-}"
  keep_rate pytorch-2.6-compiled "${pt_26c:-}"
}

keep_round_ratio() {
  local fastest ratio
  fastest="$(pytorch_fastest "${round_rate[pytorch-1.13]:-}" "${round_rate[pytorch-2.6-eager]:-}" \
    "${round_rate[pytorch-2.6-compiled]:-}")"
  ratio="$(awk -v a="${round_rate[$1]:-}" -v b="${fastest%% *}" 'BEGIN {
    if (a + 0 <= 0 || b + 0 <= 0) exit 1
    printf "%.3f\n", a / b }')" ||
    { echo "$name: round $round: no images/s for $1 or for PyTorch" >&2; exit 1; }
  round_ratios+=("$ratio")
  echo "round $round ratio $1/best-pytorch=$ratio best=${fastest#* }"
}

best_pytorch_rates() {
  pt_113="${best_rate[pytorch-1.13]:-}"
  pt_26="${best_rate[pytorch-2.6-eager]:-}"
  pt_26c="${best_rate[pytorch-2.6-compiled]:-}"
  read -r pt_best pt_best_name < <(pytorch_fastest "$pt_113" "$pt_26" "$pt_26c")
}

median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) exit 1; print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
