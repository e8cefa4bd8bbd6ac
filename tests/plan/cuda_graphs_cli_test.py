"""CUDA graphs as a stack setting on the command line, in a config file and in what --emit FILE.toml
writes (it reads back to the same plan); the host issue floor (plan/host_issue.h) they change in
plan --json; bad values refused by name with exit 2, every problem together.
usage: cuda_graphs_cli_test.py TRIDENT ROOT"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]
# Qwen3-30B-A3B at micro-batch 1 on 8 B200 (Megatron-Bridge's B200 recipe): host-bound.
BASE = ["--hf-config", os.path.join(root, "data", "models", "hf", "qwen3-30b-a3b.json"), "--seq-len", "4096",
        "--cluster", "dgx-b200", "--nodes", "1", "--tp", "1", "--pp", "1", "--ep", "8", "--dp", "8",
        "--global-batch-size", "64", "--micro-batch-size", "1", "--recompute", "none"]


def run(*args):
    return subprocess.run([trident, *args], capture_output=True, text=True)


def lint(*args):
    p = run("lint", "--json", *BASE, *args)
    return json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout.strip() else {"error": p.stderr}


none = lint()
graphed = lint("--cuda-graphs", "transformer-engine", "--cuda-graph-scope", "attn,moe_router")
full = lint("--cuda-graphs", "full_iteration")
h0, h1, hf = none.get("host_issue", {}), graphed.get("host_issue", {}), full.get("host_issue", {})
check("no graphs: the host is the floor (exposed per micro-batch, a step term)",
      h0.get("exposed_per_micro_batch_s", 0) > 0 and none["time_s"]["host_issue"] > 0
      and abs(h0["host_s"] - (h0["forward_launches"] + h0["backward_launches"]) * h0["host_launch_us"] * 1e-6) < 1e-9, h0)
check("attn + moe_router graphed: fewer launches, two graphs per scope and layer (48 layers)",
      h1.get("graph_launches") == 4 * 48 and h1.get("kernels_per_micro_batch") == h0.get("kernels_per_micro_batch")
      and h0["forward_launches"] + h0["backward_launches"] - h1["forward_launches"] - h1["backward_launches"]
      == h1["graphed_kernels"] - h1["graph_launches"] and h1["cuda_graph_scope"] == "attn,moe_router", h1)
check("full-iteration: no floor", hf.get("applies") is False and full["time_s"]["host_issue"] == 0, hf)
check("the step is the faster for it", full.get("tokens_per_s", 0) > graphed.get("tokens_per_s", 0) > none.get("tokens_per_s", 1e99),
      [none.get("tokens_per_s"), graphed.get("tokens_per_s"), full.get("tokens_per_s")])

with tempfile.TemporaryDirectory() as tmp:
    toml = os.path.join(tmp, "plan.toml")
    p = run("plan", *BASE, "--cuda-graphs", "transformer-engine", "--cuda-graph-scope", "attn,moe_router", "--emit", toml)
    text = open(toml).read() if p.returncode == 0 and os.path.exists(toml) else p.stderr
    check("--emit FILE.toml writes both settings", "cuda_graphs = 'transformer-engine'" in text
          and "cuda_graph_scope = 'attn,moe_router'" in text, text[-1500:])
    back = run("lint", "--json", "--config", toml)
    j = json.loads(back.stdout) if back.stdout.strip() else {}
    predicted = re.search(r"# Predicted: .*, (\d+) tokens/s", text)
    h = j.get("host_issue", {})
    check("the written config reads back to the plan it wrote: its graphs and its step",
          h.get("cuda_graphs") == "transformer-engine" and h.get("cuda_graph_scope") == "attn,moe_router"
          and h.get("graph_launches") == 4 * 48 and predicted
          and abs(j.get("tokens_per_s", 0) - int(predicted[1])) <= 0.5, back.stderr[-800:] or [h, j.get("tokens_per_s")])
    # The same keys in a config file's [training] table, as a person writes them.
    with open(os.path.join(tmp, "own.toml"), "w") as f:
        f.write('[training]\ncuda-graphs = "local"\n')
    own = json.loads(run("lint", "--json", *BASE, "--config", os.path.join(tmp, "own.toml")).stdout or "{}")
    check("a config's cuda-graphs = local graphs whole layers (2 launches per layer)",
          own.get("host_issue", {}).get("graph_launches") == 2 * 48, own.get("host_issue"))

bad = run("plan", *BASE, "--cuda-graphs", "partial", "--cuda-graph-scope", "attn,router")
check("unknown values: exit 2, each named with the choices, both reported", bad.returncode == 2
      and "--cuda-graphs 'partial' is unknown" in bad.stderr and "--cuda-graph-scope 'router' is unknown" in bad.stderr
      and "moe_router" in bad.stderr and "2 problems" in bad.stderr, bad.stderr)
scope = run("plan", *BASE, "--cuda-graph-scope", "attn")
check("a scope without per-layer graphs is refused", scope.returncode == 2
      and "--cuda-graph-scope attn with --cuda-graphs none" in scope.stderr, scope.stderr)
native = run("plan", *BASE, "--stack", "trident", "--cuda-graphs", "local")
check("the trident stack refuses graphs by name (it issues from C++)", native.returncode == 2
      and "--cuda-graphs local with --stack trident" in native.stderr and "fix:" in native.stderr, native.stderr)
finish()
