#!/usr/bin/env bash
# Runs the planner benchmarks; argument: the build folder.
#   plan_calibration: predicted vs published Megatron iteration times (Korthikanti 2022 Table 5)
#   plan_search:      `trident plan` search time for GPT-3 175B on 4096 and 16384 GPUs
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
csv="$here/../../../shared/data/calibration/korthikanti2022-table5.csv"
if [ -f "$csv" ]; then "$build/bench/plan/plan_calibration" "$csv"; else "$build/bench/plan/plan_calibration"; fi
"$build/bench/plan/plan_search"
