#!/usr/bin/env bash
# `make demo`: Trident's main job on the built-in example, the source chapter's GPT-3 175B case.
set -euo pipefail
build=${1:-build}
trident="$build/src/cli/trident"
cd "$(dirname "$0")/.."
echo "== trident topo: the strategy <-> topology table of GPT-3 175B on 512 DGX A100 nodes"
"$trident" topo --config examples/gpt3-175b-4096-a100.toml
