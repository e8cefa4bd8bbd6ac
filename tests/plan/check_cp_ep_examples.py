#!/usr/bin/env python3
"""The three context / expert parallel / NVLink-domain examples say what their README says.

Each example's own command runs (lint --json, and the variants the README shows) and one named
figure of each new term is redone here by hand from the example's inputs.

usage: check_cp_ep_examples.py TRIDENT EXAMPLES_DIR
"""
import json
import os
import re
import subprocess
import sys

trident, examples = sys.argv[1], sys.argv[2]
failures = 0


def lint(name, *extra):
    out = subprocess.run([trident, "lint", "--config", os.path.join(examples, name), *extra, "--json"],
                         capture_output=True, text=True)
    assert out.returncode in (0, 1), (name, out.returncode, out.stderr)
    return json.loads(out.stdout)


def check(what, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    failures += 0 if ok else 1


def codes(j, severity=None):
    return {f["code"] for f in j["findings"] if severity is None or f["severity"] == severity}


def near(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


# 1. Llama 3 405B, 131,072 tokens, cp 16 on 16,384 H100s.
j = lint("llama3-405b-cp16-h100.toml")
print(f"llama3-405b cp16: step {j['time_s']['step']:.3f} s, {j['memory_gib']['total']} GiB, MFU {100 * j['mfu']:.1f}%")
check("cp16: fits", j["fits"], j["memory_gib"])
ring = j["cp_ring"]
# One KV block: b 1 x 131072 / 16 tokens x (K, V) x 1024 kv dim / 8 tp x 2 bytes.
check("cp16: KV block = 8192 x 2 x 128 x 2 B", ring["block_bytes"] == 8192 * 2 * 128 * 2, ring)
check("cp16: cp - 1 = 15 ring steps", ring["steps"] == 15, ring)
# InfiniBand 50 GB/s per GPU at the network efficiency, 5 us latency (dgx-h100 preset).
eff = j["cost_table"]["network_efficiency"]
check("cp16: one block's transfer by hand", near(ring["block_transfer_s"], 5e-6 + 4194304 / (50e9 * eff), 1e-4), ring)
check("cp16: the ring hides behind attention", ring["block_transfer_s"] < ring["block_attention_s"]
      and j["time_s"]["cp_comm"] == 0, ring)
check("cp16: cp across nodes is said, not warned", "cp-crosses-domain" in codes(j, "info")
      and "cp-crosses-domain" not in codes(j, "warning"), codes(j))

# 2. Mixtral 8x22B on 8 DGX H100 nodes, tp 1 x ep 8 inside a node.
j = lint("mixtral-8x22b-8-dgx-h100.toml")
print(f"mixtral-8x22b: step {j['time_s']['step']:.3f} s, {j['memory_gib']['total']} GiB "
      f"({j['memory_gib']['expert_states']} GiB expert states), MFU {100 * j['mfu']:.1f}%")
check("mixtral: fits", j["fits"], j["memory_gib"])
a2a = j["ep_alltoall"]
# Experts whole (etp 1) at tp 1: each rank dispatches its own b 1 x 4096 tokens, x top-2 x hidden
# 6144 x 2 B (unpadded: the capacity factor bounds the drops, not the bytes).
check("mixtral: experts whole (etp 1)", a2a.get("expert_tensor_parallel") == 1, a2a)
check("mixtral: dispatch message = 4096 x 2 x 6144 x 2 B", a2a["message_bytes"] == 4096 * 2 * 6144 * 2, a2a)
nv = j["cost_table"]["nvlink_efficiency"]
by_hand = (8 - 1) * 3e-6 + (8 - 1) / 8 * a2a["message_bytes"] / (450e9 * nv)  # NVLink 450 GB/s, 3 us
check("mixtral: one all-to-all by hand", near(a2a["alltoall_s"], by_hand, 1e-4), (a2a, by_hand))
check("mixtral: no alltoall_latency_us in the built-in table: the link's 3 us per peer",
      near(a2a["latency_per_peer_s"], 3e-6, 1e-4), a2a)
# 2 forward + 4 backward all-to-alls per layer (full recomputation repeats the forward's), and
# the row counts' exchange before the forward's dispatch and the recomputed one (8 int32 counts:
# 7 latencies), 56 / pp 4 = 14 layers, 256 / dp 16 = 16 micro-batches.
counts_by_hand = (8 - 1) * 3e-6 + (8 - 1) / 8 * 8 * 4 / (450e9 * nv)
check("mixtral: the count exchange by hand", near(a2a["count_exchange_s"], counts_by_hand, 1e-4), (a2a, counts_by_hand))
check("mixtral: EP time = (6 x a2a + 2 x counts) x 14 x 16",
      near(j["time_s"]["ep_comm"], (6 * a2a["alltoall_s"] + 2 * a2a["count_exchange_s"]) * 14 * 16, 1e-4),
      (j["time_s"]["ep_comm"], a2a))
check("mixtral: no ep-alltoall-slow inside a node", "ep-alltoall-slow" not in codes(j), codes(j))
wide = lint("mixtral-8x22b-8-dgx-h100.toml", "--tp", "2", "--dp", "8", "--ep", "8", "--etp", "2")  # ep inside a tp rank
check("mixtral: tp 2 x ep 8 across nodes warns ep-alltoall-slow", "ep-alltoall-slow" in codes(wide, "warning"),
      codes(wide))

# 3. 405B on GB200 NVL72 racks, tp 16 inside the NVLink domain.
j = lint("llama3-405b-gb200-nvl72.toml")
print(f"405b gb200-nvl72: step {j['time_s']['step']:.3f} s, {j['memory_gib']['total']} GiB, MFU {100 * j['mfu']:.1f}%")
check("nvl72: fits", j["fits"], j["memory_gib"])
# The figures the docs and the README quote are the ones lint gives (they move with the GB200 cost table).
root = os.path.dirname(os.path.abspath(examples))
doc = open(os.path.join(root, "docs", "context-expert-nvlink.md")).read().replace("\n", " ")
m = re.search(r"predicted ([\d.]+) s per step in ([\d.]+) GiB per GPU \(simulator ([\d.]+) s, MFU ([\d.]+)%", doc)
check("nvl72: docs quote lint's step, memory and MFU",
      m and float(m.group(1)) == round(j["time_s"]["step"], 1) and float(m.group(2)) == round(j["memory_gib"]["total"], 1)
      and float(m.group(4)) == round(100 * j["mfu"], 1), m and m.groups())
sim = subprocess.run([trident, "simulate", "--config", os.path.join(examples, "llama3-405b-gb200-nvl72.toml"), "--json"],
                     capture_output=True, text=True)
check("nvl72: docs quote the simulator's step", m and float(m.group(3)) == round(json.loads(sim.stdout)["step_s"], 1),
      (m and m.groups(), sim.stdout[:300], sim.stderr[-300:]))
readme = open(os.path.join(root, "README.md")).read().replace("\n", " ")
m = re.search(r"llama3-405b-gb200-nvl72.toml`: .*? no finding, ([\d.]+) s per step", readme)
check("nvl72: the README quotes lint's step", m and float(m.group(1)) == round(j["time_s"]["step"], 1), m and m.groups())
check("nvl72: tp 16 inside the rack is fine", "tp-crosses-nodes" not in codes(j), codes(j))
dgx = lint("llama3-405b-gb200-nvl72.toml", "--cluster", "dgx-h100", "--hosts-per-nvlink-domain", "1", "--nodes", "64")
check("dgx-h100: tp 16 across two hosts is an error", "tp-crosses-nodes" in codes(dgx, "error"), codes(dgx))

sys.exit(1 if failures else 0)
