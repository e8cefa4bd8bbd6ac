#!/usr/bin/env bash
# Checkpoint save / load rates against dd (conv=fdatasync) and a plain read of the same bytes;
# argument: the build folder. CKPT_BENCH_DIR picks the disk (default: the system's temp folder).
set -eu
build=${1:-build}
"$build/bench/checkpoint/checkpoint_rate" "${CKPT_BENCH_DIR:-${TMPDIR:-/tmp}}"
# What the user waits for: the save and the load inside `trident train`, end to end, against dd.
bash "$(dirname "$0")/train_save.sh" "$build/src/cli/trident" "${CKPT_BENCH_DIR:-${TMPDIR:-/tmp}}"
