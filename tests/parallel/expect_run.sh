#!/usr/bin/env bash
# expect_run.sh RC PATTERN [PATTERN...] -- COMMAND...
# Runs COMMAND; passes when its exit code is RC ("nonzero" = anything but 0) and its output
# (stdout + stderr) contains every PATTERN (grep -E). Prints the output either way.
set -u
want="$1"; shift
patterns=()
while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift
out=$(timeout 240 "$@" 2>&1); rc=$?
echo "$out"
echo "exit code: $rc"
if [ "$want" = "nonzero" ]; then
  [ "$rc" -ne 0 ] || { echo "FAIL: expected a non-zero exit code"; exit 1; }
  [ "$rc" -ne 124 ] || { echo "FAIL: the command hung until the timeout"; exit 1; }
else
  [ "$rc" -eq "$want" ] || { echo "FAIL: expected exit code $want"; exit 1; }
fi
for p in "${patterns[@]}"; do
  echo "$out" | grep -Eq -- "$p" || { echo "FAIL: output lacks /$p/"; exit 1; }
done
echo "PASS"
