#!/usr/bin/env bash
# Checks `trident topo` on the source chapter's GPT-3 example and every bad-input case of the
# foundation: each must exit with code 2 and name the value and the fix.
set -u
trident=$1
root=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {  # name, expected exit code, pattern expected in output, command...
  local name=$1 want=$2 pattern=$3
  shift 3
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL $name: exit $rc (want $want), pattern '$pattern' in:"; sed 's/^/    /' "$tmp/out"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}

gpt3=(--model gpt3-175b --cluster dgx-a100-80g --nodes 512 --tp 8 --pp 8 --dp 64 --order tp-pp-dp)
check gpt3-table 0 "stage 0: GPUs 0-7 on node 0, TP all-reduce over NVLink" "$trident" topo "${gpt3[@]}"
check gpt3-stage1 0 "stage 1: GPUs 8-15 on node 1" "$trident" topo "${gpt3[@]}"
check gpt3-pp-ib 0 "^pp +512 +8  InfiniBand" "$trident" topo "${gpt3[@]}"
check gpt3-dp-ib 0 "^dp +64 +64  InfiniBand" "$trident" topo "${gpt3[@]}"
check gpt3-json 0 '"world": 4096' "$trident" topo "${gpt3[@]}" --json
check config-file 0 "4096 GPUs" "$trident" topo --config "$root/examples/gpt3-175b-4096-a100.toml"
check flag-beats-file 0 "tp 8 x pp 16 x dp 32" "$trident" topo --config "$root/examples/gpt3-175b-4096-a100.toml" --pp 16 --dp 32
# Context and expert parallel groups, and NVLink domains that span hosts.
l405=(--model llama3-405b --seq-len 131072 --cluster dgx-h100 --nodes 2048 --tp 8 --cp 16 --pp 16)
check cp-order 0 "order tp-cp-ep-dp-pp\) = 16384 GPUs; rank = tp \+ 8\*cp \+ 128\*dp \+ 1024\*pp" "$trident" topo "${l405[@]}"
check cp-row 0 "^cp +1024 +16  InfiniBand" "$trident" topo "${l405[@]}"
check cp-json 0 '"kind": "dp-cp"' "$trident" topo "${l405[@]}" --json
# etp 2 = tp: each ep group inside one tp rank's data ranks (Megatron-Core's default grid), 8 of them
# strided by 2 over 2 nodes; folded (etp 1) the ep group is GPUs 0-7, one node.
mix=(--model mixtral-8x22b --seq-len 4096 --cluster dgx-h100 --nodes 8 --tp 2 --pp 2 --ep 8 --etp 2)
check ep-row 0 "^ep +8 +8  InfiniBand" "$trident" topo "${mix[@]}"
check edp-row 0 "^edp +32 +2  InfiniBand" "$trident" topo "${mix[@]}"
check etp-row 0 "^etp +32 +2  NVLink" "$trident" topo "${mix[@]}"
fold=(--model mixtral-8x22b --seq-len 4096 --cluster dgx-h100 --nodes 8 --tp 2 --pp 2 --ep 8)
check ep-folded-row 0 "^ep +8 +8  NVLink" "$trident" topo "${fold[@]}"
check ep-folded-text 0 "EP group of GPU 0: 0-7, folded over attention's tp 2" "$trident" topo "${fold[@]}"
check ep-json 0 '"ep": 8' "$trident" topo "${mix[@]}" --json
check ep-divides-experts 2 "ep 3 does not divide the 8 experts" "$trident" topo --model mixtral-8x7b --cluster dgx-h100 --nodes 3 --ep 3
check cp-divides-seq 2 "sequence length 8196 is not divisible by 2 x cp = 8" "$trident" topo --model llama3-8b --seq-len 8196 --nodes 2 --cp 4
check nvl72-tp16 0 "^tp +16 +16  NVLink +900  4 +1 " "$trident" topo --model llama3-405b --cluster gb200-nvl72 --nodes 72 --tp 16 --pp 9
check dgx-tp16 0 "^tp +2 +16  InfiniBand" "$trident" topo --model llama3-405b --cluster dgx-h100 --nodes 4 --tp 16 --pp 2
check unknown-model 2 "unknown model preset 'gpt-9'.*" "$trident" topo --model gpt-9
check unknown-cluster 2 "use one of dgx-a100-40g" "$trident" topo --model gpt3-175b --cluster tpu
check world-mismatch 2 "= 2048 GPUs, but the cluster has 4096" "$trident" topo --model gpt3-175b --nodes 512 --tp 8 --pp 8 --dp 32
check world-fix 2 "fix: use --dp 64" "$trident" topo --model gpt3-175b --nodes 512 --tp 8 --pp 8 --dp 32
check order-missing-dim 2 "order 'tp-dp' is missing 'pp'" "$trident" topo --model gpt3-175b --order tp-dp
check tp-heads 2 "heads \(12\) not divisible by tensor-parallel size \(8\)" "$trident" topo --model gpt2-small --tp 8
check not-a-number 2 "--tp 'x' is not a whole number" "$trident" topo --model gpt2-small --tp x
check unknown-flag 2 "trident topo has no flag --bogus" "$trident" topo --model gpt2-small --bogus
printf 'model = "gpt3-175b"\n[layout\ntp = 8\n' >"$tmp/broken.toml"
check malformed-toml 2 "malformed TOML in .*broken.toml at line 2" "$trident" topo --config "$tmp/broken.toml"
printf 'model = "gpt3-175b"\ncolour = "blue"\n' >"$tmp/unknown.toml"
check unknown-key 2 "unknown key 'colour'" "$trident" topo --config "$tmp/unknown.toml"
# Every problem of one command is reported together.
"$trident" topo --model gpt2-small --cluster dgx-a100-80g --nodes 1 --tp 5 --pp 1 --dp 3 --order tp-dp >"$tmp/out" 2>&1
n=$(grep -c "^  - " "$tmp/out")
if [ "$n" -ge 3 ]; then echo "ok   all-problems-together ($n)"; else echo "FAIL all-problems-together: $n problems"; cat "$tmp/out"; fails=$((fails + 1)); fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
