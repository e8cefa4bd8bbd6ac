#!/usr/bin/env bash
# NVIDIA's published Megatron-Bridge runs on DGX-B200 / GB200 (data/published_runs/), each planned
# in its published layout: predicted vs published tokens/s per GPU, per model and per release.
# Argument: the build folder.
here=$(dirname "$0")
exec /usr/bin/python3 "$here/blackwell_error_table.py" "${1:-build}/src/cli/trident" \
  "$here/../../data/published_runs/megatron-bridge-blackwell.csv"
