#!/usr/bin/env bash
# Training throughput of issue 24's transformer models on Fashion-MNIST, Tandem (two CPU
# devices, data parallel) against PyTorch 1.13 (2 threads unless --threads), in one run: the same
# architecture (parameter counts checked equal), global batch, optimizer and schedule (each
# model's recipe: AdamW lr 1e-3, betas 0.9/0.999, weight decay 0.05, warmup then cosine;
# dropout 0.1) and initialization (each side's model default). Prints per model both
# images/s and the ratio.
#
#   bench/vit_vs_pytorch.sh [--model vit|mlp|all] [--steps S] [--batch B] [--attention A]
#                           [--threads T] [--build DIR] [--data DIR]
#
#   --model M      vit, mlp or all (default all: vit, then mlp)
#   --steps S      timed training steps per side (default 100 for vit, 200 for mlp;
#                  5 warm-up steps first; Tandem's run is one epoch, so (5 + S) x B must
#                  fit in the 60,000 training images)
#   --batch B      global batch (default 256: 128 per Tandem device)
#   --attention A  PyTorch's attention for vit: mha (nn.MultiheadAttention, default) or
#                  manual (q, k, v nn.Linear and softmax(q k^T / sqrt(d)) v written out;
#                  PyTorch 1.13 has no F.scaled_dot_product_attention)
#   --threads T    PyTorch's threads (default 2, the bar's; under other load PyTorch's
#                  OpenMP threads wait for each other, and 1 may be faster)
#   --build DIR    Tandem build directory holding tools/tandem (default build)
#   --data DIR     Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
#
# Tandem's run is `tandem train --model M --devices cpu:0,cpu:1` with the model's defaults,
# except --warmup 1: the model's one-epoch warmup would cover the whole short run, which
# cosine refuses; the learning rate is fed each step, so its values do not change the step's
# work. PyTorch is Debian's python3-torch 1.13 under /usr/bin/python3 (TANDEM_PYTHON
# overrides) and PyTorch 2.6 eager and compiled (../shared/tools/pytorch2), each with
# OPENBLAS_NUM_THREADS=1 (bench_common.sh's pytorch_best), against the fastest.
set -euo pipefail

models=all steps="" batch=256 attention=mha threads=2 build=build data=""
usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) models="${2:?--model needs a value}"; shift 2 ;;
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
    --attention) attention="${2:?--attention needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a value}"; shift 2 ;;
    --data) data="${2:?--data needs a value}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "vit_vs_pytorch: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
name=vit_vs_pytorch
source "$(dirname "${BASH_SOURCE[0]}")/bench_common.sh"
case "$models" in
  all) models="vit mlp" ;;
  vit|mlp) ;;
  *) echo "$name: --model must be vit, mlp or all, got '$models'" >&2; exit 2 ;;
esac
case "$attention" in
  mha|manual) ;;
  *) echo "$name: --attention must be mha or manual, got '$attention'" >&2; exit 2 ;;
esac
fixed_steps="$steps"
[[ -z "$fixed_steps" ]] || require_positive_ints steps
require_positive_ints batch threads
find_tools
warmup=5
model_recipe=1  # each side's own initializer, optimizer and schedule (bench_common.sh)

results=()
for model in $models; do
  steps="${fixed_steps:-$([[ $model == vit ]] && echo 100 || echo 200)}"
  if (((warmup + steps) * batch > 60000)); then
    echo "$name: $warmup + $steps steps of batch $batch need $(((warmup + steps) * batch)) training images; Fashion-MNIST has 60,000 (lower --steps)" >&2
    exit 2
  fi
  pt_flags=(--threads "$threads")
  [[ $model == vit ]] && pt_flags+=(--attention "$attention")

  # The same architecture: Tandem's parameter count against the PyTorch module's.
  td_params="$("$tandem" dump --model "$model" --devices 1 --batch "$batch" --format summary |
    sed -n 's/^model [^:]*: \([0-9,]*\) parameters.*/\1/p' | tr -d ,)"

  echo "== $model: Tandem, $steps steps of batch $batch on cpu:0,cpu:1 (model defaults, --warmup 1)" >&2
  td=$(tandem_rate "$model" --warmup 1)
  echo "== $model: PyTorch, $steps steps of batch $batch, $threads threads" >&2
  pytorch_best "$model" "${pt_flags[@]}"
  pt_params="$(sed -n 's/.* params=\([0-9]*\),.*/\1/p' "$TMP/pytorch.txt" | head -n 1)"
  if [[ -z "$td_params" || "$td_params" != "$pt_params" ]]; then
    echo "$name: $model has ${td_params:-?} parameters in Tandem but ${pt_params:-?} in PyTorch: not the same architecture" >&2
    exit 1
  fi
  results+=("$(awk -v m="$model" -v td="$td" -v a1="$pt_113" -v a2="${pt_26:-n/a}" -v a3="${pt_26c:-n/a}" \
    -v pt="$pt_best" -v pn="$pt_best_name" -v s="$steps" -v b="$batch" -v p="$td_params" -v t="$threads" \
    -v a="$([[ $model == vit ]] && echo " attention=$attention")" 'BEGIN {
      printf "%s tandem images_per_s=%.1f pytorch-1.13=%s pytorch-2.6-eager=%s pytorch-2.6-compiled=%s ratio tandem/best-pytorch=%.3f best=%s steps=%d batch=%d params=%d pytorch_threads=%d%s", m, td, a1, a2, a3, td / pt, pn, s, b, p, t, a }')")
done
printf '%s\n' "${results[@]}"
