#!/usr/bin/env bash
# Resources: a run that needs more than the machine has is refused before anything is
# allocated, exit 2, with the estimate, its breakdown and what is available; --threads beyond
# the cores is capped with a note saying why.
#   1. a huge --hidden with one layer (hundreds of GiB: before, "out of host memory: could not
#      map ... MiB", exit 1, after the allocation was tried);
#   2. under mpirun -np 2, a model that fits one rank but not two on one node (each rank ~0.75
#      of MemAvailable): the node's sum is refused. The ranks run under `ulimit -v` (0.3 of
#      MemAvailable each), so a build without the check fails its allocation instead of
#      filling the machine;
#   3. --threads above the cores, in one process and under mpirun -np 2;
#   4. a checkpoint larger than the free space of its folder (a 1 MiB tmpfs: where mount is not
#      allowed, the script reruns itself in a user and mount namespace, unshare -rm, that allows it).
# A part that cannot run here (part 2 on a small machine, part 4 without any way to mount) is
# skipped saying so, the others still run, and the test exits 77: ctest reports it Skipped.
# usage: resources_test.sh TRIDENT MPIEXEC
set -u
probe=$(mktemp -d)
if ! mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
  rmdir "$probe"
  [ -z "${TRIDENT_IN_UNSHARE:-}" ] && unshare -rm true 2>/dev/null &&
    TRIDENT_IN_UNSHARE=1 exec unshare -rm bash "$0" "$@"
else
  umount "$probe"; rmdir "$probe"
fi
skipped=""
trident=$1
mpiexec=$2
dir=$(mktemp -d)
mnt=$dir/small-disk
cleanup() { mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"; rm -rf "$dir"; }
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the cores of this affinity (nproc alone honours OMP_NUM_THREADS)
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)

head -c 3000 /usr/share/games/fortunes/art > "$dir/small.txt"
"$trident" data prepare "$dir/small.txt" "$dir/small.tok" > /dev/null || fail "data prepare"
common=(--data "$dir/small.tok" --steps 1 --eval-batches 1 --micro-batch-size 1)

# 1. One layer of hidden 65536: 51.5 G parameters, 770 GiB with gradients and AdamW moments.
out=$("$trident" train "${common[@]}" --layers 1 --hidden 65536 --heads 64 --seq-len 64 --threads 1 2>&1); rc=$?
echo "$out" | head -2
[ "$rc" -eq 2 ] || fail "a model beyond the host memory: expected exit code 2, got $rc"$'\n'"$out"
echo "$out" | grep -q "code: host-memory" || fail "no host-memory problem"$'\n'"$out"
echo "$out" | grep -qE "needs [0-9.]+ GiB of host memory .*weights [0-9.]+ GiB \+ gradients [0-9.]+ GiB \+ AdamW m, v [0-9.]+ GiB \+ activations" ||
  fail "the estimate's breakdown is missing"
echo "$out" | grep -q "available (/proc/meminfo MemAvailable\|available (the cgroup" || fail "what is available is not named"
echo "$out" | grep -q "fix: use fewer --layers or a smaller --hidden" || fail "no fix"

# 2. Each rank needs ~0.75 of MemAvailable: one would fit, the node's two do not.
layer_kib=$((12 * 4096 * 4096 * 16 / 1024))  # fp32 weights, gradients, m, v of one layer of hidden 4096
layers=$((avail_kib * 3 / 4 / layer_kib + 1))
limit_kib=$((avail_kib * 3 / 10))
if [ "$limit_kib" -lt 2000000 ]; then
  echo "SKIP part 2: MemAvailable ${avail_kib} KiB is too little to run two ranks under a safe ulimit"
  skipped="$skipped 2"
else
  out=$(ulimit -v "$limit_kib"; timeout 240 "$mpiexec" --oversubscribe --bind-to none -np 2 "$trident" train \
        "${common[@]}" --dp 2 --layers "$layers" --hidden 4096 --heads 32 --seq-len 64 --threads 1 2>&1); rc=$?
  echo "$out" | grep -- "- the run needs"
  [ "$rc" -eq 2 ] || fail "two ranks beyond the node's memory: expected exit code 2, got $rc"$'\n'"$out"
  echo "$out" | grep -q "code: host-memory" || fail "mpirun: no host-memory problem"$'\n'"$out"
  echo "$out" | grep -q "on a node (2 ranks there" || fail "the node's two ranks are not counted"$'\n'"$out"
fi

# 3. Threads beyond the cores: capped, saying why.
small=(--layers 1 --hidden 32 --heads 2 --seq-len 16)
out=$("$trident" train "${common[@]}" "${small[@]}" --threads $((cores * 4)) 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "--threads above the cores: expected a capped run, got exit $rc"$'\n'"$out"
echo "$out" | grep "threads  "
echo "$out" | grep -q "threads     --threads $((cores * 4)) capped to $cores per rank" || fail "no cap note"$'\n'"$out"
echo "$out" | grep -q "cpu ($cores OpenMP threads" || fail "the kernels do not run the capped count"
out=$(timeout 240 "$mpiexec" --oversubscribe --bind-to none -np 2 "$trident" train "${common[@]}" "${small[@]}" \
      --dp 2 --global-batch-size 2 --threads "$cores" 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "mpirun --threads $cores: expected a capped run, got exit $rc"$'\n'"$out"
echo "$out" | grep "threads  "
share=$(( cores / 2 > 0 ? cores / 2 : 1 ))
[ "$cores" -ge 2 ] && { echo "$out" | grep -q "capped to $share per rank: 2 ranks on this node share its $cores cores" ||
  fail "2 ranks x $cores threads on $cores cores: no cap note"$'\n'"$out"; }

# 4. A checkpoint larger than the free space of its folder.
mkdir -p "$mnt"
if mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
  out=$("$trident" train "${common[@]}" --layers 2 --hidden 64 --heads 2 --seq-len 16 --threads 1 \
        --checkpoint "$mnt/ckpt" 2>&1); rc=$?
  echo "$out" | grep -- "- the checkpoint"
  [ "$rc" -eq 2 ] || fail "a checkpoint beyond the disk: expected exit code 2, got $rc"$'\n'"$out"
  echo "$out" | grep -q "code: checkpoint-disk" || fail "no checkpoint-disk problem"$'\n'"$out"
  echo "$out" | grep -q "step 1" && fail "the run trained before refusing"
  [ -e "$mnt/ckpt" ] && fail "something was written"
else
  echo "SKIP part 4: cannot mount a 1 MiB tmpfs here (no CAP_SYS_ADMIN, and unshare -rm is not allowed)"
  skipped="$skipped 4"
fi
[ -z "$skipped" ] || { echo "the other parts passed; skipped part(s):$skipped"; exit 77; }
echo "PASS"
