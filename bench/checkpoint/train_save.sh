#!/usr/bin/env bash
# What the user waits for: a checkpoint save (and load) inside `trident train`, end to end,
# against dd on the same disk in the same run. Saving: the wall time of a one-step run with
# --checkpoint minus the same run without (best of 3 each) against `dd conv=fdatasync` of the
# checkpoint's bytes. Loading: a --resume run of one more step minus a fresh one-step run against
# `dd of=/dev/null` of the shard (from the page cache the save left, as the resume reads it).
# Model: 4 layers, hidden 1024 (51 M parameters; weights + AdamW m, v = 0.6 GB).
# usage: train_save.sh TRIDENT [FOLDER]
set -eu
trident=$1
root=${2:-${TMPDIR:-/tmp}}
dir=$(mktemp -d "$root/trident-train-save-XXXXXX")
trap 'rm -rf "$dir"' EXIT
run=(--layers 4 --hidden 1024 --heads 16 --seq-len 16 --micro-batch-size 1 --global-batch-size 1
     --eval-every 0 --eval-batches 1 --threads "${BENCH_THREADS:-2}" --seed 5)
now() { date +%s.%N; }
seconds() { local t0; t0=$(now); "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }; echo "$(now) - $t0" | bc -l; }
best() { printf '%s\n' "$@" | sort -g | head -1; }
without=() with=() inside=() dd_w=() resumed=() dd_r=()
for round in 1 2 3; do
  rm -rf "$dir/ck" "$dir/ck.saving" "$dir/dd"
  without+=("$(seconds "$trident" train "${run[@]}" --steps 1)")
  t0=$(now)
  "$trident" train "${run[@]}" --steps 1 --checkpoint "$dir/ck" >"$dir/with.out" || { cat "$dir/with.out"; exit 1; }
  with+=("$(echo "$(now) - $t0" | bc -l)")
  inside+=("$(sed -n 's/^checkpoint: .* saved in \([0-9.]*\) s$/\1/p' "$dir/with.out")")
  bytes=$(du -cb "$dir"/ck/shard-* | tail -1 | cut -f1)
  dd_w+=("$(seconds dd if=/dev/zero of="$dir/dd" bs=4M count=$(( (bytes + 4194303) / 4194304 )) conv=fdatasync status=none)")
  resumed+=("$(seconds "$trident" train --resume "$dir/ck" --steps 2 --threads "${BENCH_THREADS:-2}")")
  dd_r+=("$(seconds dd if="$dir/ck/shard-00000.bin" of=/dev/null bs=4M status=none)")
done
i=$(best "${inside[@]}") w=$(best "${without[@]}") s=$(best "${with[@]}") d=$(best "${dd_w[@]}") r=$(best "${resumed[@]}") dr=$(best "${dd_r[@]}")
save=$(echo "$s - $w" | bc -l) load=$(echo "$r - $w" | bc -l)
printf 'train save: checkpoint of %d bytes (4 layers, hidden 1024, AdamW): run with --checkpoint %.2f s - without %.2f s = save %.2f s; dd conv=fdatasync of the same bytes %.2f s; dd / save = %.2f (target >= 0.8)\n' \
  "$bytes" "$s" "$w" "$save" "$d" "$(echo "$d / $save" | bc -l)"
# The same save as the run itself timed it (its "saved in" line): free of the start-up's noise on a busy machine.
printf 'train save as the run times it: %.2f s (best of 3); dd / save = %.2f\n' "$i" "$(echo "$d / $i" | bc -l)"
printf 'train load: --resume run of one more step %.2f s - fresh one-step run %.2f s = load %.2f s (negative: within the noise); dd of the shard to /dev/null %.2f s; dd / load = %.2f\n' \
  "$r" "$w" "$load" "$dr" "$(echo "$dr / $load" | bc -l)"
