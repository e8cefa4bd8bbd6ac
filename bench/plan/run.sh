#!/usr/bin/env bash
# Runs the planner benchmarks; argument: the build folder.
#   plan_calibration: predicted vs published iteration times, errors per source (data/calibration/)
#   plan_search:      `trident plan` search time for GPT-3 175B on 4096 and 16384 GPUs
#   plan_scale:       search + rationale from 4,096 to 100,000 GPUs: 98K/4K ratio (and per layout
#                     estimated), 16K and 100K against goals
set -eu
build=${1:-build}
"$build/bench/plan/plan_calibration" || echo "plan_calibration: a source misses the calibration targets"
"$build/bench/plan/plan_search"
"$build/bench/plan/plan_scale"
