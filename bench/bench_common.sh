# Shared set-up of the bench/*_vs_pytorch.sh and resnet18_curve.sh scripts: sourced after
# their own argument parsing, with $name (the script's name for messages) and $build set.
#
#   require_positive_ints VAR...   each variable a positive integer, else exit 2
#   find_tools                     sets here, root, build (absolute), python (one that
#                                  imports torch), tandem and a TMP directory removed on
#                                  exit; a missing piece is exit 1 saying how to get it
#   tandem_rate MODEL [FLAG...]    images/s of $steps timed training steps of batch $batch
#                                  on cpu:0,cpu:1 after $warmup warm-up steps ($data if set)
#   pytorch_rate MODEL [FLAG...]   the same for bench/pytorch_train.py on 2 threads

require_positive_ints() {
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
      echo "$name: --${v//_/-} must be a positive integer, got '${!v}'" >&2
      exit 2
    }
  done
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
              --limit-test "$batch" --init normal:0.01)
  [[ -n "${data:-}" ]] && args+=(--data "$data")
  "$tandem" "${args[@]}" --limit-train $(((warmup + steps) * batch)) --metrics "$TMP/all.csv" "$@" >&2
  "$tandem" "${args[@]}" --limit-train $((warmup * batch)) --metrics "$TMP/warm.csv" "$@" >&2
  awk -F, -v images=$((steps * batch)) 'FNR == 2 { s[FILENAME] = $6 }
    END { for (f in s) if (f ~ /all.csv/) a = s[f]; else w = s[f]; printf "%.1f\n", images / (a - w) }' \
    "$TMP/all.csv" "$TMP/warm.csv"
}

# PyTorch's images/s from bench/pytorch_train.py's last line (5 warm-up steps, then $steps).
pytorch_rate() {
  local model="$1"; shift
  local args=(--model "$model" --init normal:0.01 --lr 0.1 --steps "$steps" --batch "$batch" --threads 2)
  [[ -n "${data:-}" ]] && args+=(--data "$data")
  "$python" "$here/pytorch_train.py" "${args[@]}" "$@" | tee "$TMP/pytorch.txt" >&2
  local rate
  rate="$(tail -n 1 "$TMP/pytorch.txt" | sed -n 's/.*images_per_s=\([0-9.eE+-]*\).*/\1/p')"
  [[ -n "$rate" ]] || { echo "$name: no images_per_s from PyTorch" >&2; exit 1; }
  echo "$rate"
}
