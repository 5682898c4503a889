# Shared set-up of the bench/*_vs_pytorch.sh and resnet18_curve.sh scripts: sourced after
# their own argument parsing, with $name (the script's name for messages) and $build set.
#
#   require_positive_ints VAR...   each variable a positive integer, else exit 2
#   find_tools                     sets here, root, build (absolute), python (one that
#                                  imports torch), tandem and a TMP directory removed on
#                                  exit; a missing piece is exit 1 saying how to get it

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
