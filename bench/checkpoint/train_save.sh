#!/usr/bin/env bash
# What the user waits for: checkpoint saves (and the load) inside `trident train`, end to end,
# against dd on the same disk in the same run. Best of 3 rounds for every figure.
#   The last save (the run waits for it whole: every byte durable, the folder swapped in): a
#     one-step run with --checkpoint minus the same run without, and the run's own "saved in" line.
#   Saves during the run (written in the background while training goes on): a 3-step run with
#     --checkpoint-every 1 minus the same run saving only at the end, per save: what they cost the
#     run (the write of the state it waits for, and the steps slowed by the rest of the save); beside it the
#     run's own figures: the wait until the state has left the buffers, and how long until the save was durable.
#   The peer: `dd if=/dev/zero conv=fdatasync` of the checkpoint's bytes, and dd of the checkpoint's
#     own bytes (a copy of its shard, read from the page cache) with conv=fdatasync.
#   Loading: a --resume run of one more step minus a fresh one-step run against `dd of=/dev/null`
#     of the shard, both from the disk: the shard's pages are dropped from the page cache before
#     each (dd iflag=nocache count=0; the save writes with O_DIRECT, past the cache, so a resume
#     reads the disk, as after a restart); beside it the run's own "loaded in" line.
# Model: LAYERS (4) layers, hidden 1024: 51 M parameters, weights + AdamW m, v = 0.6 GB (12: 1.7 GB).
# usage: train_save.sh TRIDENT [FOLDER] [LAYERS]
set -eu
trident=$1
root=${2:-${TMPDIR:-/tmp}}
layers=${3:-4}
dir=$(mktemp -d "$root/trident-train-save-XXXXXX")
trap 'rm -rf "$dir"' EXIT
run=(--layers "$layers" --hidden 1024 --heads 16 --seq-len 16 --micro-batch-size 1 --global-batch-size 1
     --eval-every 0 --eval-batches 1 --threads "${BENCH_THREADS:-2}" --seed 5)
now() { date +%s.%N; }
seconds() { local t0; t0=$(now); "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }; echo "$(now) - $t0" | bc -l; }
timed() {  # timed OUT CMD...: the command's seconds; its output in OUT
  local out=$1 t0; shift; t0=$(now)
  "$@" >"$out" || { cat "$out"; exit 1; }
  echo "$(now) - $t0" | bc -l
}
uncache() { for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none; done; }  # drops a file's cached pages
best() { printf '%s\n' "$@" | sort -g | head -1; }
field() { sed -n "$2" "$1" | sort -g | head -1; }  # the smallest number a sed expression picks from a file
without=() with=() inside=() loaded=() dd_w=() dd_s=() resumed=() dd_r=() end_only=() every=() copied=() first=() durable=()
for round in 1 2 3; do
  rm -rf "$dir/ck" "$dir/ck.saving" "$dir/dd" "$dir/shard"
  without+=("$(seconds "$trident" train "${run[@]}" --steps 1)")
  with+=("$(timed "$dir/with.out" "$trident" train "${run[@]}" --steps 1 --checkpoint "$dir/ck")")
  inside+=("$(field "$dir/with.out" 's/^checkpoint: .* saved in \([0-9.]*\) s$/\1/p')")
  bytes=$(du -cb "$dir"/ck/shard-* | tail -1 | cut -f1)
  sync
  dd_w+=("$(seconds dd if=/dev/zero of="$dir/dd" bs=4M count=$(( (bytes + 4194303) / 4194304 )) conv=fdatasync status=none)")
  rm -f "$dir/dd"; cat "$dir"/ck/shard-* > "$dir/shard"; sync
  dd_s+=("$(seconds dd if="$dir/shard" of="$dir/dd" bs=4M conv=fdatasync status=none)")
  rm -f "$dir/dd" "$dir/shard"
  sync; uncache "$dir"/ck/shard-*.bin
  resumed+=("$(timed "$dir/resumed.out" "$trident" train --resume "$dir/ck" --steps 2 --threads "${BENCH_THREADS:-2}")")
  loaded+=("$(field "$dir/resumed.out" 's/^checkpoint: .* loaded in \([0-9.]*\) s$/\1/p')")
  uncache "$dir"/ck/shard-*.bin
  dd_r+=("$(seconds dd if="$dir/ck/shard-00000.bin" of=/dev/null bs=4M status=none)")
  rm -rf "$dir/ck"
  end_only+=("$(seconds "$trident" train "${run[@]}" --steps 3 --checkpoint "$dir/ck")")
  rm -rf "$dir/ck"
  every+=("$(timed "$dir/every.out" "$trident" train "${run[@]}" --steps 3 --checkpoint-every 1 --checkpoint "$dir/ck")")
  copied+=("$(field "$dir/every.out" 's/^checkpoint: .* (step 2) state taken in \([0-9.]*\) s .*/\1/p')")
  first+=("$(field "$dir/every.out" 's/^checkpoint: .* (step 1) state taken in \([0-9.]*\) s .*/\1/p')")
  durable+=("$(field "$dir/every.out" 's/^checkpoint: .* written in the background: durable \([0-9.]*\) s after it began)$/\1/p')")
done
i=$(best "${inside[@]}") w=$(best "${without[@]}") s=$(best "${with[@]}") d=$(best "${dd_w[@]}") ds=$(best "${dd_s[@]}")
r=$(best "${resumed[@]}") l=$(best "${loaded[@]}") dr=$(best "${dd_r[@]}") e=$(best "${end_only[@]}") v=$(best "${every[@]}")
c=$(best "${copied[@]}") f=$(best "${first[@]}") u=$(best "${durable[@]}")
save=$(echo "$s - $w" | bc -l) load=$(echo "$r - $w" | bc -l) bg=$(echo "($v - $e) / 2" | bc -l)
ratio() { echo "$1 / $2" | bc -l; }
printf 'peer: dd if=/dev/zero conv=fdatasync of the checkpoint'"'"'s %d bytes %.2f s; dd of its own bytes (a copy of the shard) conv=fdatasync %.2f s\n' "$bytes" "$d" "$ds"
printf 'last save (the run waits until durable and in place): run with --checkpoint %.2f s - without %.2f s = %.2f s; dd / save = %.2f (target >= 0.8)\n' \
  "$s" "$w" "$save" "$(ratio "$d" "$save")"
printf '  the same save as the run times it (its "saved in" line, free of the start-up'"'"'s noise): %.2f s; dd / save = %.2f; dd of its own bytes / save = %.2f\n' \
  "$i" "$(ratio "$d" "$i")" "$(ratio "$ds" "$i")"
printf 'saves during the run (background): 3 steps saving after each %.2f s - saving at the end only %.2f s = %.2f s per save (2 saves); dd / that = %.2f\n' \
  "$v" "$e" "$bg" "$(ratio "$d" "$bg")"
printf '  as the run times them: the loop waits %.2f s until the state has left its buffers (the first save %.2f s; dd / wait = %.2f); durable and in place %.2f s after the save began (dd / that = %.2f)\n' \
  "$c" "$f" "$(ratio "$d" "$c")" "$u" "$(ratio "$d" "$u")"
printf 'train load: --resume run of one more step %.2f s - fresh one-step run %.2f s = load %.2f s (negative: within the noise); dd of the shard to /dev/null %.2f s (both from the disk); dd / load = %.2f\n' \
  "$r" "$w" "$load" "$dr" "$(ratio "$dr" "$load")"
printf '  the same load as the run times it (its "loaded in" line: read from the disk, every slice checked, in place): %.2f s; dd / load = %.2f\n' \
  "$l" "$(ratio "$dr" "$l")"
