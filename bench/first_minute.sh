#!/usr/bin/env bash
# The first minute: seconds from `./scripts/train` to its first epoch line on a brand-new
# minimal Debian 12 root, R runs of ../shared/tools/fresh-machine (the committed HEAD of
# this repository, cloned into a new root each run). Per run: apt-get (set-up's start to
# CMake), CMake's configure, the build, data loading plus the first epoch, and the total;
# then the median total. Each run's build/.ninja_log (per-step times, docs/PERF.md) and
# the timed log are kept in OUT (default /tmp/first-minute); the roots are removed.
#
#   bench/first_minute.sh [--runs R] [--out DIR] [-- TRAIN_ARGS ...]   (as root)
#
# Measure on a quiet machine (load < 1): the build is most of the minute and 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
runs=3 out=/tmp/first-minute train_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a value}"; shift 2 ;;
    --out) out="${2:?--out needs a value}"; shift 2 ;;
    --) shift; train_args=("$@"); break ;;
    *) echo "first_minute: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
tool=$(cd .. && pwd)/shared/tools/fresh-machine
[[ -x $tool ]] || { echo "first_minute: $tool is missing (this measures with it)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "first_minute: fresh-machine needs root" >&2; exit 2; }
git diff --quiet HEAD -- || echo "first_minute: uncommitted changes are not measured (the clone is of HEAD $(git rev-parse --short HEAD))" >&2
mkdir -p "$out"

# The second at which the first line of times file $1 matching regex $2 was printed.
at() { awk -F'\t' -v re="$2" '$2 ~ re { print $1; exit }' "$1"; }

totals=()
printf '%4s %8s %10s %8s %14s %8s\n' run apt-get configure build "data+epoch 1" total
for ((r = 1; r <= runs; r++)); do
  log=$out/run-$r.txt
  rc=0
  "$tool" --keep --repo "$(pwd)" -- "./scripts/train${train_args[*]:+ ${train_args[*]}}" >"$log" 2>&1 || rc=$?
  root=$(sed -n 's/^fresh-machine: root kept at //p' "$log")
  [[ -n $root ]] || { echo "first_minute: run $r kept no root (see $log)" >&2; exit 1; }
  work=$(dirname "$root")
  times=$out/run-$r.times
  cp "$work/log-1.txt.times" "$times"
  cp "$root/project/$(basename "$(pwd)")/build/.ninja_log" "$out/run-$r.ninja_log" 2>/dev/null || true
  # fresh-machine unmounted /proc and /tmp of the root before it kept it.
  if grep -q " $work/" /proc/mounts; then
    echo "first_minute: something is still mounted under $work; left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  ((rc == 0)) || { echo "first_minute: run $r failed (see $log and $times)" >&2; exit 1; }
  configure=$(at "$times" '^setup: configuring')
  build=$(at "$times" '^\[[0-9]+/[0-9]+\] ')
  built=$(at "$times" '^lenet on ')
  epoch=$(at "$times" '^ +1 +[0-9]')
  [[ -n $epoch ]] || { echo "first_minute: run $r printed no first epoch line (see $out/run-$r.times)" >&2; exit 1; }
  configure=${configure:-0} build=${build:-$configure}
  printf '%4d %8d %10d %8d %14d %8d\n' "$r" "$configure" $((build - configure)) $((built - build)) \
    $((epoch - built)) "$epoch"
  totals+=("$epoch")
done
median=$(printf '%s\n' "${totals[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
echo "median: the first epoch line ${median} s after ./scripts/train started ($runs runs, $(git rev-parse --short HEAD))"
