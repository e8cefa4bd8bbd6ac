#!/usr/bin/env bash
# Runs every benchmark script bench/*/run.sh with the build folder as argument.
set -u
build=${1:-build}
status=0
for script in "$(dirname "$0")"/*/run.sh; do
  [ -f "$script" ] || continue
  echo "== $script"
  bash "$script" "$build" || status=1
done
exit $status
