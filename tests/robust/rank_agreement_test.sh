#!/usr/bin/env bash
# Ranks that disagree: under mpirun every rank resolves its own run. One rank given another
# value (a launcher script that passes a flag to rank 1 only) or another copy of the token file
# (same name and header, one token changed) must stop every rank with a named error, exit 2,
# before any training; identical copies of the data under different paths must still agree.
# usage: rank_agreement_test.sh TRIDENT MPIEXEC
set -u
trident=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

# Two copies of one corpus, and a third that differs in one byte (same length, same header but its checksum).
text="the quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly. "
for i in $(seq 60); do printf '%s' "$text"; done > "$dir/a.txt"
sed 's/lazy/hazy/' "$dir/a.txt" > "$dir/b.txt"
mkdir -p "$dir/rank0" "$dir/rank1" "$dir/other"
"$trident" data prepare "$dir/a.txt" "$dir/rank0/data.tok" > /dev/null || fail "data prepare"
cp "$dir/rank0/data.tok" "$dir/rank1/data.tok"
"$trident" data prepare "$dir/b.txt" "$dir/other/data.tok" > /dev/null || fail "data prepare"
cmp -s -n 32 "$dir/rank0/data.tok" "$dir/other/data.tok" || fail "the changed copy should keep the header (but its checksum)"

# Each rank runs this wrapper: RANK1_EXTRA is appended on rank 1 only, RANK1_DATA replaces its folder.
cat > "$dir/launch.sh" <<'EOF'
#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-0}
data=$DIR/rank$rank/data.tok
if [ "$rank" = 1 ]; then
  [ -n "$RANK1_DATA" ] && data=$RANK1_DATA
  exec "$TRIDENT" "$@" --data "$data" $RANK1_EXTRA
fi
exec "$TRIDENT" "$@" --data "$data"
EOF
chmod +x "$dir/launch.sh"
run() {  # run RANK1_EXTRA RANK1_DATA: prints the output, returns the exit code
  DIR=$dir TRIDENT=$trident RANK1_EXTRA=$1 RANK1_DATA=$2 timeout 240 "$mpiexec" --oversubscribe --bind-to none \
    -x DIR -x TRIDENT -x RANK1_EXTRA -x RANK1_DATA -np 2 "$dir/launch.sh" train --dp 2 --layers 1 --hidden 32 \
    --heads 2 --seq-len 16 --steps 2 --global-batch-size 4 --micro-batch-size 2 --threads 1 2>&1
}

out=$(run "" ""); rc=$?
echo "$out" | tail -3
[ "$rc" -eq 0 ] || fail "identical copies of the data under two paths must agree (exit $rc)"

out=$(run "--lr 0.002" ""); rc=$?
echo "$out" | head -6
[ "$rc" -eq 2 ] || fail "a flag on rank 1 only: expected exit code 2, got $rc"
echo "$out" | grep -q "the ranks resolved different runs: --lr is '0.001' on rank 0; '0.002' on rank 1" ||
  fail "the error must name --lr and both ranks' values"
echo "$out" | grep -q "step 1" && fail "no rank may train"

out=$(run "" "$dir/other/data.tok"); rc=$?
echo "$out" | head -4
[ "$rc" -eq 2 ] || fail "another copy of the data on rank 1: expected exit code 2, got $rc"
echo "$out" | grep -q "the token file's contents is .* on rank 0; .* on rank 1" ||
  fail "the error must name the token file's contents"
echo "PASS"
