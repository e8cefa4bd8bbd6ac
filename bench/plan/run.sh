#!/usr/bin/env bash
# Runs the planner benchmarks; argument: the build folder.
#   plan_calibration: predicted vs published iteration times, errors per source (data/calibration/)
#   plan_search:      `trident plan` search time for GPT-3 175B on 4096 and 16384 GPUs
set -eu
build=${1:-build}
"$build/bench/plan/plan_calibration" || echo "plan_calibration: a source misses the calibration targets"
"$build/bench/plan/plan_search"
