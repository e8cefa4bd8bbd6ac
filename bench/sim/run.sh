#!/usr/bin/env bash
# Runs the simulator benchmarks; argument: the build folder.
set -eu
build=${1:-build}
"$build/bench/sim/sim_scale"
