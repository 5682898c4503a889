#!/usr/bin/env bash
# Issue 43's quality bar: the zoo's GPT trained on the King James Bible by Tandem (two CPU
# devices, data parallel) and by PyTorch (bench/gpt_pytorch.py, the same architecture and
# recipe: AdamW 1e-3, betas 0.9/0.99, weight decay 0.1 on the matrices, 100 warmup steps then
# cosine to lr/10, gradient norm clipped at 1, batch 64 windows of 128 characters, dropout
# 0.1), the same number of steps, each evaluated on the text's held-out last tenth every K
# steps. Prints one table of both validation losses and, last, Tandem's final validation loss
# minus PyTorch's against the bar (at most 0.02 above).
#
#   bench/gpt_kjv_curve.sh [--steps N] [--eval-every K] [--threads T] [--build DIR]
#                          [--text FILE] [--out DIR] [--python PY]
#
#   --steps N       training steps (default 2000, the issue's)
#   --eval-every K  evaluation period (default 250)
#   --threads T     PyTorch's threads (default 2, Tandem's two devices' one core each)
#   --build DIR     Tandem build directory holding tools/tandem (default build)
#   --text FILE     the text (default: the KJV, written by scripts/kjv-text)
#   --out DIR       keep tandem.csv, pytorch.csv, both runs' output, Tandem's checkpoint
#                   (DIR/checkpoint, for tandem generate) and the curves' picture
#                   (curves.svg, tandem plot) there (default: a temporary directory)
#   --python PY     PyTorch's interpreter (default /usr/bin/python3: PyTorch 1.13, the
#                   fastest here; `../shared/tools/pytorch2 python3` runs 2.6)
#
# The sides draw their windows and dropout masks with their own generators, so the curves
# agree in level, not to the digit. At 2000 steps Tandem takes ~10 minutes on a quiet
# 2-core machine, PyTorch 1.13 ~45.
set -euo pipefail

steps=2000 eval_every=250 threads=2 build=build text="" out="" pt_python=""
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --eval-every) eval_every="${2:?--eval-every needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --text) text="${2:?--text needs a value}"; shift 2 ;;
    --out) out="${2:?--out needs a value}"; shift 2 ;;
    --python) pt_python="${2:?--python needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpt_kjv_curve: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=gpt_kjv_curve
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
require_positive_ints steps eval_every threads
(( steps > 100 )) || { echo "$name: --steps must exceed the 100 warmup steps, got $steps" >&2; exit 2; }
find_tools
[[ -n "$pt_python" ]] || pt_python="$python"
if [[ -n "$out" ]]; then
  mkdir -p "$out" || { echo "$name: --out $out: cannot create it" >&2; exit 1; }
  out="$(cd "$out" && pwd)"
else
  out="$TMP"
fi

text_into_tmp "$text"

echo "== Tandem: $steps steps on cpu:0,cpu:1, evaluated every $eval_every" >&2
rm -rf "$out/checkpoint"
"$tandem" train --model gpt --data "text:$TMP/text.txt" --devices cpu:0,cpu:1 \
  --steps "$steps" --eval-every "$eval_every" --checkpoint "$out/checkpoint" \
  --metrics "$out/tandem.csv" 2>&1 | tee "$out/tandem.txt" >&2
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "$name: tandem train failed (see above)" >&2; exit 1; }

echo "== PyTorch ($pt_python): $steps steps, $threads threads" >&2
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset: OpenBLAS's own threads fight PyTorch's else.
# Run from $root, which pytorch2 binds into its root.
read -r -a pt_run <<<"$pt_python"
(cd "$root" && env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${pt_run[@]}" \
  "$here/gpt_pytorch.py" --text "$TMP/text.txt" --steps "$steps" --eval-every "$eval_every" \
  --schedule nanogpt --attention auto --threads "$threads" --metrics "$TMP/pytorch.csv") 2>&1 |
  tee "$out/pytorch.txt" >&2
[[ ${PIPESTATUS[0]} -eq 0 && -s "$TMP/pytorch.csv" ]] ||
  { echo "$name: PyTorch's run failed (see above)" >&2; exit 1; }
[[ "$out" == "$TMP" ]] || cp "$TMP/pytorch.csv" "$out/pytorch.csv"

if "$tandem" plot "$out/tandem.csv" "$TMP/pytorch.csv" --label Tandem --label PyTorch \
  --title "gpt on the KJV: Tandem (cpu:0,cpu:1) and PyTorch" -o "$out/curves.svg" >&2; then
  echo "curves: $out/curves.svg" >&2
fi

# Both CSVs name their columns; rows are matched by step.
awk -F, -v bar=0.02 -v torch="$(head -n 1 "$out/pytorch.txt" | cut -d, -f1)" '
  FNR == 1 { for (i = 1; i <= NF; ++i) col[FILENAME, $i] = i; next }
  FILENAME == ARGV[1] { td[$col[FILENAME, "step"]] = $col[FILENAME, "val_loss"]
                        tdr[$col[FILENAME, "step"]] = $col[FILENAME, "tokens_per_s"]; next }
  { pt[$col[FILENAME, "step"]] = $col[FILENAME, "val_loss"]
    ptr[$col[FILENAME, "step"]] = $col[FILENAME, "tokens_per_s"]; steps[++n] = $col[FILENAME, "step"] }
  END {
    printf "%6s %12s %12s %8s   (%s)\n", "step", "tandem_val", "pytorch_val", "diff", torch
    for (i = 1; i <= n; ++i) {
      s = steps[i]
      if (!(s in td)) { print "gpt_kjv_curve: Tandem has no evaluation at step " s > "/dev/stderr"; exit 1 }
      printf "%6d %12.4f %12.4f %+8.4f\n", s, td[s], pt[s], td[s] - pt[s]
    }
    d = td[s] - pt[s]
    printf "final validation loss after %d steps: tandem %.4f, pytorch %.4f: tandem %+.4f (bar: at most +%.2f) %s\n",
      s, td[s], pt[s], d, bar, d <= bar ? "PASS" : "FAIL"
  }' "$out/tandem.csv" "$TMP/pytorch.csv"
