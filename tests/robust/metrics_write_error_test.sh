#!/usr/bin/env bash
# A write error on the metrics file (a full disk) stops the run at that step with an error
# naming the file, exit 2, after saving the checkpoint there (on another disk), which a resumed
# run continues from; in one process and under mpirun -np 2 (rank 0 writes the metrics, every
# rank stops). The full disk is a 16 KiB tmpfs, nearly filled; where mount is not allowed, the
# write error is a file-size limit instead (ulimit -f, SIGXFSZ ignored: writes fail with EFBIG),
# in one process only, and the test exits 77 after it (ctest reports it Skipped: the mpirun part
# did not run). Where mount needs a namespace, the script reruns itself in one (unshare -rm).
# usage: metrics_write_error_test.sh TRIDENT MPIEXEC
set -u
probe=$(mktemp -d)
if ! mount -t tmpfs -o size=16k tmpfs "$probe" 2>/dev/null; then
  rmdir "$probe"
  [ -z "${TRIDENT_IN_UNSHARE:-}" ] && unshare -rm true 2>/dev/null &&
    TRIDENT_IN_UNSHARE=1 exec unshare -rm bash "$0" "$@"
else
  umount "$probe"; rmdir "$probe"
fi
trident=$1
mpiexec=$2
dir=$(mktemp -d)
mnt=$dir/full-disk
cleanup() { mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"; rm -rf "$dir"; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

head -c 3000 /usr/share/games/fortunes/art > "$dir/small.txt"
"$trident" data prepare "$dir/small.txt" "$dir/small.tok" > /dev/null || fail "data prepare"
mkdir -p "$mnt"
if mount -t tmpfs -o size=16k tmpfs "$mnt" 2>/dev/null; then
  how="a full tmpfs"
  limit=unlimited
  steps=300
  head -c 12288 /dev/zero > "$mnt/filler"  # 4 KiB left: about 20 metrics lines
else
  how="a file-size limit (mount not allowed here)"
  limit=64  # KiB: the metrics file fails past it (about 350 lines); a checkpoint shard of this model is smaller
  steps=2000
fi
echo "write error from $how"
[ "$limit" = unlimited ] || echo "SKIP the mpirun -np 2 part: it needs the tmpfs"

run() {  # run NAME EXTRA-TRAIN-ARGS...: trains $steps steps writing metrics to the full disk ($launcher before it)
  local name=$1
  shift
  rm -f "$mnt/$name.jsonl"
  (trap '' XFSZ; ulimit -f "$limit"; timeout 240 "${launcher[@]}" "$trident" train --data "$dir/small.tok" --layers 1 \
     --hidden 8 --heads 2 --seq-len 8 --vocab 256 --steps "$steps" --eval-every 0 --eval-batches 1 --log-every 100 \
     --threads 1 --metrics "$mnt/$name.jsonl" --checkpoint "$dir/$name.ckpt" --checkpoint-every 1000 "$@" 2>&1)
}

launches="one mpi"
[ "$limit" = unlimited ] || launches=one  # mpirun's launcher resets SIGXFSZ and writes files of its own
for launch in $launches; do
  if [ "$launch" = one ]; then launcher=(); out=$(run one); rc=$?
  else launcher=("$mpiexec" --oversubscribe --bind-to none -np 2); out=$(run mpi --dp 2 --global-batch-size 16); rc=$?; fi
  echo "$out" | grep -A1 -- "- cannot"
  [ "$rc" -eq 2 ] || fail "$launch: a metrics write error must stop the run with exit 2, got $rc"$'\n'"$out"
  echo "$out" | grep -q "code: metrics-write" || fail "$launch: no metrics-write problem"$'\n'"$out"
  echo "$out" | grep -q "cannot write to '$mnt/$launch.jsonl'" || fail "$launch: the error must name the file"
  step=$(echo "$out" | sed -n 's/.*(the metrics file, at step \([0-9]*\)).*/\1/p' | head -1)
  [ -n "$step" ] && [ "$step" -lt "$steps" ] || fail "$launch: the run must stop at the failing step"$'\n'"$out"
  saved=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['meta']['step'])" "$dir/$launch.ckpt/manifest.json") ||
    fail "$launch: no checkpoint"
  [ "$saved" = "$step" ] || fail "$launch: the checkpoint holds step $saved, the run stopped at $step"
  lines=$(wc -l < "$mnt/$launch.jsonl")
  echo "$launch: stopped at step $step, checkpoint at step $saved, $lines whole metrics lines"
  [ "$lines" -ge 1 ] && [ "$lines" -lt "$step" ] || fail "$launch: $lines metrics lines for $step steps"
  [ "$launch" = one ] && saved_one=$saved
  rm -f "$mnt/$launch.jsonl"
done

# The checkpoint resumes where the run stopped.
out=$("$trident" train --data "$dir/small.tok" --resume "$dir/one.ckpt" --steps "$steps" --stop-at $((saved_one + 2)) \
      --eval-every 0 --eval-batches 1 --threads 1 2>&1) || fail "resume failed"$'\n'"$out"
echo "$out" | grep -q "step  *$((saved_one + 1))/$steps" ||
  fail "the resumed run must continue at step $((saved_one + 1))"$'\n'"$out"
[ "$limit" = unlimited ] || { echo "the one-process part passed; the mpirun -np 2 part was skipped"; exit 77; }
echo "PASS"
