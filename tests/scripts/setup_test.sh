#!/usr/bin/env bash
# scripts/setup's answers to failures a user can fix, tried with stand-ins for id, sudo,
# dpkg-query, apt-get and df on a PATH of their own: each must end with one line saying
# what to do and exit code 1. Runs on a copy of the script in a scratch folder, so the
# real build/ is never touched.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d -t tandem-setup-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/repo/scripts" "$scratch/bin"
cp "$src/scripts/setup" "$scratch/repo/scripts/setup"
for tool in bash dirname grep cat mktemp rm awk sed mkdir tee; do
  ln -s "$(command -v $tool)" "$scratch/bin/$tool"
done
stub() { printf '#!/bin/bash\n%s\n' "$2" >"$scratch/bin/$1" && chmod +x "$scratch/bin/$1"; }
failures=0

# expect NAME EXPECTED-LAST-LINE: runs the copy of setup, checks its exit code and last line.
expect() {
  local name=$1 want=$2 out rc last
  out=$(env -i PATH="$scratch/bin" bash "$scratch/repo/scripts/setup" 2>&1 </dev/null)
  rc=$?
  last=$(printf '%s\n' "$out" | tail -n 1)
  if [[ $rc -ne 1 || $last != "$want" ]]; then
    echo "FAIL $name: exit $rc, last line:"
    echo "  got:  $last"
    echo "  want: $want"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

# One package missing, everything else installed.
stub dpkg-query 'if [[ $* == *ocl-icd-opencl-dev* ]]; then echo "unknown ok not-installed"; else echo "install ok installed"; fi'

stub id 'echo 1000'
expect "no root, no sudo" \
  "setup: installing packages needs root, and sudo is not installed: run this as root, or have an administrator run: apt-get install ocl-icd-opencl-dev"

stub sudo 'exit 1'
expect "sudo wants a password, no terminal" \
  "setup: installing packages needs root, and sudo asks for a password with no terminal to type it: run 'sudo true' first or run this as root"
rm "$scratch/bin/sudo"

stub id 'echo 0'
stub df 'printf "Filesystem 1048576-blocks Used Available Capacity Mounted\n/dev/x 100 90 10 90%% /\n"'
stub apt-get 'if [[ $1 == update ]]; then echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving '"'"'deb.debian.org'"'"'"; exit 100; fi'
expect "no network" \
  "setup: apt-get update failed: the package archive cannot be reached; check the network, proxy or /etc/apt/sources.list, or install by hand: apt-get install ocl-icd-opencl-dev"

stub apt-get 'if [[ $1 == install ]]; then echo "E: Write error - write (28: No space left on device)"; exit 100; fi'
expect "disk full while installing" \
  "setup: apt-get install failed: the disk is full (10 MiB free under /var/cache/apt); free some space and run again"

stub apt-get 'if [[ $1 == install ]]; then echo "E: Unable to locate package ocl-icd-opencl-dev"; exit 100; fi'
expect "package not in the archive" \
  "setup: apt-get install failed: a package is not in the configured archive (Debian 12 'bookworm' with main is needed); run 'apt-get update' or fix /etc/apt/sources.list"

stub apt-get 'if [[ $1 == install ]]; then echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 7 (apt-get)"; exit 100; fi'
expect "apt busy" \
  "setup: apt-get install failed: another apt or dpkg is running; wait for it to finish and run again"

# The data set, installed in the background while the build runs, cannot be fetched: the
# build goes on, and set-up then ends with the install's reason.
stub dpkg-query 'if [[ $* == *dataset-fashion-mnist* ]]; then echo "unknown ok not-installed"; else echo "install ok installed"; fi'
stub df 'printf "Filesystem 1048576-blocks Used Available Capacity Mounted\n/dev/x 100000 0 100000 0%% /\n"'
stub apt-get 'if [[ $1 == install ]]; then echo "E: Failed to fetch http://deb.debian.org/debian/pool/main/f/fashion-mnist/x.deb  Temporary failure resolving '"'"'deb.debian.org'"'"'"; exit 100; fi'
stub cmake 'echo "cmake $*" >>"$(dirname "$0")/cmake.log"'
stub nproc 'echo 2'
expect "background install fails while building" \
  "setup: apt-get install failed: the package archive cannot be reached; check the network, proxy or /etc/apt/sources.list, or install by hand: apt-get install dataset-fashion-mnist"
grep -q -- "--build build" "$scratch/bin/cmake.log" ||
  { echo "FAIL background install fails while building: the build did not run"; failures=$((failures + 1)); }
rm -f "$scratch/bin/cmake" "$scratch/bin/nproc" "$scratch/repo/build/build.ninja"
stub df 'printf "Filesystem 1048576-blocks Used Available Capacity Mounted\n/dev/x 100 90 10 90%% /\n"'

# Everything installed, but no room for the build.
stub dpkg-query 'echo "install ok installed"'
expect "no room for the build" \
  "setup: only 10 MiB free for $scratch/repo/build, the build needs about 400 MiB; free some space and run again"

((failures == 0)) || { echo "$failures case(s) failed"; exit 1; }
