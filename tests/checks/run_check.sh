#!/usr/bin/env bash
# Runs one check-line test, as LLVM's lit does for MLIR's pass tests: every `// RUN:` line
# of the file is a shell pipeline, run from the file's folder with
#   %s       the file itself,
#   %tandem  the tandem CLI,
#   FileCheck  LLVM's FileCheck (llvm-15-tools),
#   not      a command that must fail (its exit status inverted),
# and the test passes when every pipeline succeeds. A line ending in '\' continues on the
# next RUN line. (lit itself is not a Debian package for Python 3; this is all of it we use.)
#
#   tests/checks/run_check.sh FILE TANDEM FILECHECK
set -uo pipefail
if (($# != 3)); then
  echo "usage: $0 FILE TANDEM FILECHECK" >&2
  exit 2
fi
file=$(realpath "$1") tandem=$2 filecheck=$3
cd "$(dirname "$file")"

not() { ! "$@"; }
export -f not

runs=()
current=""
while IFS= read -r line; do
  [[ $line =~ ^[[:space:]]*//[[:space:]]RUN:[[:space:]]?(.*)$ ]] || continue
  part=${BASH_REMATCH[1]}
  if [[ $part == *'\' ]]; then
    current+="${part%\\} "
    continue
  fi
  runs+=("$current$part")
  current=""
done <"$file"
if ((${#runs[@]} == 0)); then
  echo "$file: no RUN lines" >&2
  exit 1
fi

for run in "${runs[@]}"; do
  cmd=${run//%tandem/$tandem}
  cmd=${cmd//%s/$file}
  cmd=${cmd//FileCheck/$filecheck}
  echo "RUN: $cmd"
  if ! bash -o pipefail -c "$cmd"; then
    echo "$file: failed: $run" >&2
    exit 1
  fi
done
