#!/usr/bin/env bash
# `make demo`: Trident's main job on the built-in example, the source chapter's GPT-3 175B case:
# plan the layout for 512 DGX A100 nodes, print the topology table of the chosen layout, then
# train a small GPT on the bundled English corpus for about a minute and sample from it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
trident="$build/src/cli/trident"
run=(--model gpt3-175b --cluster dgx-a100-80g --nodes 512 --global-batch-size 1536)

echo "== 1. trident plan: the best layouts for GPT-3 175B on 512 DGX A100 nodes (4096 GPUs)"
"$trident" plan "${run[@]}" --top 3

echo
echo "== 2. trident topo: the strategy <-> topology table of the winner, read from the plan's own config"
"$trident" plan "${run[@]}" --top 1 --emit "$build/demo-plan.toml" >/dev/null
"$trident" topo --config "$build/demo-plan.toml"

echo
echo "== 3. trident train: a small GPT learns the bundled corpus (Debian's fortunes) for about a minute"
"$trident" train --layers 4 --hidden 192 --heads 4 --seq-len 64 --micro-batch-size 32 --steps 300 --lr 2e-3 \
  --warmup 20 --eval-every 100 --log-every 50 --checkpoint "$build/demo.ckpt"

echo
echo "== 4. trident generate: what it learned"
"$trident" generate --checkpoint "$build/demo.ckpt" --prompt "The " --tokens 300
