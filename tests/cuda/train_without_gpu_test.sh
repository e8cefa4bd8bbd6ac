#!/usr/bin/env bash
# `trident train --device cuda` without a GPU: exit code 2 (input error) and a message naming
# the missing GPU and the fix. Exit 77 (skipped) while `trident train` has no --device option,
# where a GPU is present, or when the command stops at an unrelated argument error first.
set -u
trident="$1"
if ! "$trident" train --help 2>/dev/null | grep -q -- "--device"; then
  echo "trident train has no --device option yet: skipped"
  exit 77
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: skipped"
  exit 77
fi
out=$(timeout 50 "$trident" train --device cuda 2>&1)
rc=$?
echo "$out"
if ! echo "$out" | grep -qiE "cuda|gpu"; then
  echo "trident train stopped before reaching the device (exit $rc): skipped"
  exit 77
fi
[ "$rc" -eq 2 ] || { echo "expected exit code 2 (input error), got $rc"; exit 1; }
echo "$out" | grep -qi "no CUDA GPU" || { echo "message does not say that no CUDA GPU is usable"; exit 1; }
echo "$out" | grep -q -- "--device cpu" || { echo "message does not give the fix (--device cpu)"; exit 1; }
echo "ok"
