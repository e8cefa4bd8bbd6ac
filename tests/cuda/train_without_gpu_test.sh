#!/usr/bin/env bash
# `trident train --device cuda` without a GPU: exit code 2 (input error) and a message naming
# the missing GPU and the fix. Exit 77 (skipped) only where a GPU is present.
set -u
trident="$1"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: skipped"
  exit 77
fi
out=$(timeout 50 "$trident" train --device cuda 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 2 ] || { echo "expected exit code 2 (input error), got $rc"; exit 1; }
echo "$out" | grep -qi "no CUDA GPU" || { echo "message does not say that no CUDA GPU is usable"; exit 1; }
echo "$out" | grep -q -- "--device cpu" || { echo "message does not give the fix (--device cpu)"; exit 1; }
echo "ok"
