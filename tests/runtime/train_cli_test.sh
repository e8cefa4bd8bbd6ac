#!/usr/bin/env bash
# `trident train` end to end on a small text: the loss falls, a stop + resume continues with
# bit-identical losses, generate reads the checkpoint, and bad input is refused with exit code 2
# without overwriting anything.
set -u
TRIDENT=$1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export TRIDENT_DATA_DIR=$DIR/cache

# A small English text (repeated so the model can learn it quickly).
for i in $(seq 1 40); do
  echo "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife."
  echo "The quick brown fox jumps over the lazy dog, and the lazy dog sleeps in the warm sun."
done >"$DIR/text.txt"
"$TRIDENT" data prepare "$DIR/text.txt" "$DIR/text.tok" >/dev/null || fail "data prepare"

BASE=(--data "$DIR/text.tok" --layers 2 --hidden 64 --heads 2 --seq-len 32 --micro-batch-size 4
      --lr 3e-3 --threads 2 --eval-every 0 --eval-batches 1)
MODEL=("${BASE[@]}" --global-batch-size 8)
"$TRIDENT" train "${MODEL[@]}" --steps 40 --metrics "$DIR/a.jsonl" >"$DIR/a.out" || fail "train"
first=$(head -1 "$DIR/a.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(tail -1 "$DIR/a.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
awk -v f="$first" -v l="$last" 'BEGIN{exit !(l < 0.6*f)}' || fail "loss did not fall: $first -> $last"
grep -q "planner" "$DIR/a.out" || fail "start-up table lacks the planner's memory"
echo "loss falls: $first -> $last"

# Stop at 20, resume to 40: steps 21..40 must have exactly the losses of the straight run.
"$TRIDENT" train "${MODEL[@]}" --steps 40 --stop-at 20 --checkpoint "$DIR/c.ckpt" >/dev/null || fail "train to 20"
"$TRIDENT" train "${MODEL[@]}" --steps 40 --resume "$DIR/c.ckpt" --metrics "$DIR/b.jsonl" >"$DIR/b.out" || fail "resume"
grep -qE "^step +21/40 \| loss" "$DIR/b.out" || { cat "$DIR/b.out"; fail "the resumed run does not count on from step 21"; }
diff <(sed -n '21,40p' "$DIR/a.jsonl" | sed 's/.*"loss":\([0-9.e-]*\).*/\1/') \
     <(sed 's/.*"loss":\([0-9.e-]*\).*/\1/' "$DIR/b.jsonl") >/dev/null || fail "resumed losses differ"
[ "$(wc -l <"$DIR/b.jsonl")" -eq 20 ] || fail "resume ran the wrong number of steps"
echo "resume: steps 21-40 bit-identical"

# Resuming into the same directory continues it (the new checkpoint is swapped in whole).
cp -r "$DIR/c.ckpt" "$DIR/inplace.ckpt"
"$TRIDENT" train "${MODEL[@]}" --steps 40 --stop-at 30 --resume "$DIR/inplace.ckpt" --checkpoint "$DIR/inplace.ckpt" >/dev/null \
  || fail "resume into the same checkpoint directory"
grep -q '"step": 30' "$DIR/inplace.ckpt/manifest.json" || fail "the in-place checkpoint is not at step 30"

# A checkpoint alone describes its model, name included: resuming with no model flags keeps it.
"$TRIDENT" train --data "$DIR/text.tok" --model gpt2-small --layers 2 --hidden 64 --heads 2 --seq-len 32 --micro-batch-size 4 \
  --global-batch-size 4 --threads 2 --eval-every 0 --eval-batches 1 --steps 2 --checkpoint "$DIR/named.ckpt" >/dev/null \
  || fail "train a named preset"
"$TRIDENT" train --data "$DIR/text.tok" --micro-batch-size 4 --global-batch-size 4 --threads 2 --eval-every 0 \
  --eval-batches 1 --steps 3 --resume "$DIR/named.ckpt" >"$DIR/named.out" || fail "resume from the checkpoint alone"
head -1 "$DIR/named.out" | grep -q "gpt2-small (modified)" || { head -3 "$DIR/named.out"; fail "the resumed run lost the model's name"; }

"$TRIDENT" generate --checkpoint "$DIR/c.ckpt" --tokens 20 --prompt "The quick" >"$DIR/g.out" || fail "generate"
[ "$(wc -c <"$DIR/g.out")" -gt 20 ] || fail "generate printed too little"

# Bad input: exit code 2, a message, nothing overwritten.
expect2() {
  local what=$1; shift
  "$@" >"$DIR/err.out" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$DIR/err.out"; fail "$what: exit code $rc, expected 2"; }
  grep -q "fix:" "$DIR/err.out" || fail "$what: no fix in the message"
}
cp -r "$DIR/c.ckpt" "$DIR/keep.ckpt"
echo "unknown_key = 3" >"$DIR/bad.toml"
expect2 "unknown config key" "$TRIDENT" train "${MODEL[@]}" --steps 2 --config "$DIR/bad.toml" --checkpoint "$DIR/c.ckpt"
expect2 "batch not dividing" "$TRIDENT" train "${BASE[@]}" --steps 2 --global-batch-size 10 --checkpoint "$DIR/c.ckpt"
printf 'NOTATOKENFILE-------------------------------------------------------------------' >"$DIR/bad.tok"
expect2 "bad token file" "$TRIDENT" train --data "$DIR/bad.tok" --steps 2 --checkpoint "$DIR/c.ckpt"
cp -r "$DIR/keep.ckpt" "$DIR/trunc.ckpt"
truncate -s 1000 "$DIR/trunc.ckpt/shard-00000.bin"
expect2 "truncated checkpoint" "$TRIDENT" train "${MODEL[@]}" --steps 40 --resume "$DIR/trunc.ckpt" --checkpoint "$DIR/c.ckpt"
cp -r "$DIR/keep.ckpt" "$DIR/corrupt.ckpt"
printf '\x55\x55\x55\x55' | dd of="$DIR/corrupt.ckpt/shard-00000.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect2 "corrupt checkpoint" "$TRIDENT" train "${MODEL[@]}" --steps 40 --resume "$DIR/corrupt.ckpt" --checkpoint "$DIR/c.ckpt"
expect2 "corrupt checkpoint (generate)" "$TRIDENT" generate --checkpoint "$DIR/corrupt.ckpt"
diff -r "$DIR/c.ckpt" "$DIR/keep.ckpt" >/dev/null || fail "a refused run overwrote the checkpoint"
printf 'my notes' >"$DIR/notes.txt"
expect2 "checkpoint path is not a checkpoint" "$TRIDENT" train "${MODEL[@]}" --steps 2 --checkpoint "$DIR/notes.txt"
[ "$(cat "$DIR/notes.txt")" = "my notes" ] || fail "a run overwrote a file that is not a checkpoint"
printf '[cost]\nhbm_efficiency = 0.3\n' >"$DIR/cost.toml"
expect2 "--cost without a report to predict for" "$TRIDENT" train "${MODEL[@]}" --steps 2 --cost "$DIR/cost.toml"
grep -q "cost-unused\|read only by the rehearsal report" "$DIR/err.out" || { cat "$DIR/err.out"; fail "--cost refusal does not say why"; }
echo "bad input refused with exit 2, checkpoint untouched"
echo PASS
