#!/usr/bin/env bash
# Generation speed of the zoo's GPT (issue 43), in one run: `tandem generate` (its one-token
# step with a KV cache per layer, on one CPU device) against nanoGPT's generate loop in
# PyTorch (bench/gpt_pytorch.py --generate: the whole window of up to 128 tokens each token,
# no cache), both drawing N tokens after a one-token prompt with top-k 40. Prints tokens/s per
# side and Tandem's ratio to each.
#
#   bench/gpt_generate_vs_pytorch.sh [--tokens N] [--threads T] [--build DIR] [--text FILE]
#                                    [--checkpoint DIR] [--pytorch LIST]
#
#   --tokens N        tokens to draw (default 500)
#   --threads T       PyTorch's threads (default 1: Tandem's one device is one core)
#   --build DIR       Tandem build directory holding tools/tandem (default build)
#   --text FILE       the text (default: the KJV, written by scripts/kjv-text)
#   --checkpoint DIR  a gpt checkpoint to generate from (default: one made by a 2-step
#                     training run: speed does not depend on the weights)
#   --pytorch LIST    1.13 (/usr/bin/python3) and/or 2.6 (eager, ../shared/tools/pytorch2);
#                     default both
set -euo pipefail

tokens=500 threads=1 build=build text="" checkpoint="" variants=1.13,2.6
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tokens) tokens="${2:?--tokens needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --text) text="${2:?--text needs a value}"; shift 2 ;;
    --checkpoint) checkpoint="${2:?--checkpoint needs a value}"; shift 2 ;;
    --pytorch) variants="${2:?--pytorch needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpt_generate_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=gpt_generate_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints tokens threads
for v in ${variants//,/ }; do
  [[ $v == 1.13 || $v == 2.6 ]] ||
    { echo "$name: --pytorch takes 1.13 and 2.6, got '$v'" >&2; exit 2; }
done
find_tools
pytorch2="${PYTORCH2:-$root/../shared/tools/pytorch2}"

text_into_tmp "$text"
if [[ -z "$checkpoint" ]]; then
  checkpoint="$TMP/checkpoint"
  "$tandem" train --model gpt --data "text:$TMP/text.txt" --devices cpu:0 --steps 2 \
    --eval-every 2 --warmup 1 --limit-test 64 --checkpoint "$checkpoint" >/dev/null ||
    { echo "$name: tandem train (for a checkpoint) failed" >&2; exit 1; }
fi

"$tandem" generate --checkpoint "$checkpoint" --tokens "$tokens" --top-k 40 --seed 1 \
  >/dev/null 2>"$TMP/generate.txt" ||
  { cat "$TMP/generate.txt" >&2; echo "$name: tandem generate failed" >&2; exit 1; }
td="$(sed -n 's/^tandem: drew [0-9]* tokens in [0-9.]* s, \([0-9.]*\) tokens\/s.*/\1/p' \
  "$TMP/generate.txt")"
[[ -n "$td" ]] || { echo "$name: no tokens/s from tandem generate" >&2; exit 1; }
lines=("tandem $td tokens/s (KV cache, cpu:0)")
for v in ${variants//,/ }; do
  if [[ $v == 1.13 ]]; then run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$python")
  else run=("$pytorch2" python3); fi
  (cd "$root" && "${run[@]}" "$here/gpt_pytorch.py" --text "$TMP/text.txt" \
    --generate "$tokens" --threads "$threads") >"$TMP/pytorch.txt" 2>&1 ||
    { cat "$TMP/pytorch.txt" >&2; echo "$name: PyTorch $v failed" >&2; exit 1; }
  pt="$(sed -n 's/^pytorch generate tokens_per_s=\([0-9.]*\) .*/\1/p' "$TMP/pytorch.txt")"
  [[ -n "$pt" ]] || { echo "$name: no tokens/s from PyTorch $v" >&2; exit 1; }
  lines+=("$(awk -v v="$v" -v pt="$pt" -v td="$td" -v t="$threads" 'BEGIN {
    printf "pytorch-%s eager %.1f tokens/s (nanoGPT loop, %d thread%s; tandem %.1fx)", v, pt, t,
      t == 1 ? "" : "s", td / pt }')")
done
echo "gpt generate, $tokens tokens after a one-token prompt, top-k 40; load" \
  "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?)"
printf '%s\n' "${lines[@]}"
