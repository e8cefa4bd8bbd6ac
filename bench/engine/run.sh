#!/usr/bin/env bash
# The FMA peak probe against a hand-written loop, then the CPU engine against PyTorch (three
# configs, two conditions); argument: the build folder.
build=${1:-build}
echo "-- the FMA peak trident measures against a hand-written FMA loop (same process)"
"$build/bench/engine/fma_probe_ratio" || echo "fma_probe_ratio failed or is not built (cmake --build $build --target fma_probe_ratio)"
exec bash "$(dirname "$0")/engine_bench.sh" "$build"
