#!/usr/bin/env bash
# The CPU engine against PyTorch (three configs, two conditions); argument: the build folder.
exec bash "$(dirname "$0")/engine_bench.sh" "${1:-build}"
