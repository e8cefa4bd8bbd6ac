#!/bin/bash
# The calibration reader refuses a 0/1 column holding anything else (exit 2, the column, the value
# and a fix) instead of reading it as on or off; the shipped rows read as they are.
# usage: calibration_reader_test.sh PLAN_CALIBRATION DATA_DIR
set -u
tool=$1 data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$tool" "$data/korthikanti2022-table5.csv" > "$tmp/good.out" 2>&1 || { echo "shipped rows refused:"; cat "$tmp/good.out"; fail=1; }
# 22B-full's sequence_parallel cell (0) becomes each bad value in turn.
for bad in 2 yes; do
  sed "s/^22B-full,\(.*\),full,0,1\.42,/22B-full,\1,full,$bad,1.42,/" "$data/korthikanti2022-table5.csv" > "$tmp/bad.csv"
  grep -q "full,$bad,1.42," "$tmp/bad.csv" || { echo "could not plant '$bad'"; fail=1; continue; }
  "$tool" "$tmp/bad.csv" > "$tmp/out" 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "column 'sequence_parallel' is '$bad'" "$tmp/out" || ! grep -q "fix:" "$tmp/out"; then
    echo "sequence_parallel '$bad': exit $rc"; cat "$tmp/out"; fail=1
  fi
done
# A recipe switch column with 3.
{ grep '^#' "$data/deepspeed-megatron-a100.csv"; grep -v '^#' "$data/deepspeed-megatron-a100.csv" |
    awk 'NR == 1 { print $0 ",fused_swiglu"; next } { print $0 ",3" }'; } > "$tmp/bad3.csv"
"$tool" "$tmp/bad3.csv" > "$tmp/out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "column 'fused_swiglu' is '3', not 0 or 1" "$tmp/out"; then
  echo "fused_swiglu '3': exit $rc"; cat "$tmp/out"; fail=1
fi
[ $fail -eq 0 ] && echo "calibration reader: bad 0/1 cells refused, shipped rows read"
exit $fail
