#!/usr/bin/env bash
# One run check: `trident train` only parses; every check of the run is the runtime's one run
# check, on every rank before any work. A config with many problems at once (loop values, the
# device, the token file against the model, the checkpoint to resume) reports all of them in
# one round, exit 2, with one set of problem codes: the same in one process and under
# `mpirun -np 2`, and no rank trains.
# usage: run_check_test.sh TRIDENT MPIEXEC
set -u
trident=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
codes() { grep -o '^    code: .*' | sed 's/^    code: //' | sort | tr '\n' ' '; }

head -c 3000 /usr/share/games/fortunes/art > "$dir/small.txt"
prepared=$("$trident" data prepare "$dir/small.txt" "$dir/small.tok") || fail "data prepare"
tokens=$(echo "$prepared" | grep -o '[0-9]* tokens' | head -1 | cut -d' ' -f1)   # the file's own count
tiny=(--data "$dir/small.tok" --layers 1 --hidden 32 --heads 2 --seq-len 16 --micro-batch-size 2 --threads 1)
"$trident" train "${tiny[@]}" --steps 3 --eval-batches 1 --checkpoint "$dir/ckpt" > /dev/null 2>&1 ||
  fail "the checkpoint to resume could not be written"

# Every value below is wrong in its own way; the loop values are parsed fine (no range error).
bad=(--steps 2 --lr 0 --threads 0 --eval-batches 0 --device tpu --stop-at 0 --vocab 100 --seq-len 4096
     --layers 2 --hidden 32 --heads 2 --data "$dir/small.tok" --resume "$dir/ckpt")
want="data-too-small resume-model resume-setting resume-steps train-device train-eval train-lr train-stop-at train-threads train-vocab "

out=$("$trident" train "${bad[@]}" 2>&1); rc=$?
echo "$out" | head -3
[ "$rc" -eq 2 ] || fail "one process: expected exit code 2, got $rc"
got=$(echo "$out" | codes)
[ "$got" = "$want" ] || fail "one process: codes '$got', want '$want'"$'\n'"$out"
echo "$out" | grep -q "trident train: 10 problems" || fail "one process: the 10 problems must be reported together"
echo "$out" | grep -q "vocab (100) is smaller than the token file's vocabulary (256" || fail "the vocabulary is not named"
echo "$out" | grep -q "has $tokens tokens, too few for sequences of 4096" || fail "the token count is not named"

out=$(timeout 240 "$mpiexec" --oversubscribe --bind-to none -np 2 "$trident" train "${bad[@]}" --dp 2 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "mpirun -np 2: expected exit code 2, got $rc"$'\n'"$out"
got=$(echo "$out" | codes)
# dp 2 with the checkpoint's global batch of 2 (micro 2 x dp 1) leaves no whole micro-batch per rank.
want_dp2="batch-divisibility $want"
[ "$got" = "$want_dp2" ] || fail "mpirun -np 2: codes '$got', want '$want_dp2' (printed once, by rank 0)"$'\n'"$out"
echo "$out" | grep -q "step 1" && fail "no rank may train"

# A problem found while parsing (a value out of its range) is reported with the run check's.
out=$("$trident" train "${tiny[@]}" --steps 2 --log-every 0 --eval-batches 0 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "expected exit code 2, got $rc"
got=$(echo "$out" | codes)
[ "$got" = "option-range train-eval " ] || fail "parse and run problems together: codes '$got'"$'\n'"$out"
echo "PASS"
