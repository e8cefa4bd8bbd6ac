"""Megatron-Core's --recompute-modules as a setting on the command line, in a config file and in what
--emit FILE.toml writes (it reads back to the same plan); --emit megatron writes it; modules the
model lacks or the planner does not model refused by name with exit 2, every problem together.
usage: recompute_modules_cli_test.py TRIDENT ROOT"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]
# DeepSeek-V3 in NVIDIA's GB200 layout (Megatron-Bridge 26.02, R0216 of data/published_runs).
HF = os.path.join(root, "data", "models", "hf")
BASE = ["--hf-config", os.path.join(HF, "deepseek-v3.json"), "--seq-len", "4096", "--cluster", "gb200-nvl72",
        "--nodes", "64", "--tp", "1", "--pp", "4", "--dp", "64", "--ep", "64", "--global-batch-size", "4096",
        "--micro-batch-size", "1", "--precision", "mxfp8", "--stack", "megatron-core-te", "--hosts-per-nvlink-domain",
        "16", "--schedule", "interleaved", "--virtual-stages", "4", "--moe-load-imbalance", "1", "--zero", "1"]


def run(*args):
    return subprocess.run([trident, *args], capture_output=True, text=True)


def lint(*args):
    p = run("lint", "--json", *BASE, *args)
    return json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout.strip() else {"error": p.stderr}


none = lint("--recompute", "none")
up = lint("--recompute", "selective", "--recompute-modules", "mla_up_proj")
full = lint("--recompute", "full")
act = lambda j: j.get("memory_gib", {}).get("activations", 0)  # noqa: E731
check("mla_up_proj holds less than none and more than full", act(none) > act(up) > act(full), [act(none), act(up), act(full)])
check("... and its step lies between them (the up projections again, not the whole layer)",
      none.get("tokens_per_s", 0) > up.get("tokens_per_s", 0) > full.get("tokens_per_s", 1e99),
      [none.get("tokens_per_s"), up.get("tokens_per_s"), full.get("tokens_per_s")])

with tempfile.TemporaryDirectory() as tmp:
    toml = os.path.join(tmp, "plan.toml")
    p = run("plan", *BASE, "--recompute", "selective", "--recompute-modules", "mla_up_proj,moe_act", "--emit", toml)
    text = open(toml).read() if p.returncode == 0 and os.path.exists(toml) else p.stderr
    check("--emit FILE.toml writes the modules", "recompute_modules = 'mla_up_proj,moe_act'" in text, text[-1500:])
    back = run("lint", "--json", "--config", toml)
    j = json.loads(back.stdout) if back.stdout.strip() else {}
    predicted = re.search(r"# Predicted: .*, (\d+) tokens/s", text)
    check("the written config reads back to the plan it wrote",
          predicted and abs(j.get("tokens_per_s", 0) - int(predicted[1])) <= 0.5, back.stderr[-800:] or j.get("tokens_per_s"))
    with open(os.path.join(tmp, "own.toml"), "w") as f:
        f.write('[training]\nrecompute = "selective"\nrecompute-modules = "[\'mla_up_proj\']"\n')
    own = json.loads(run("lint", "--json", *[a for a in BASE], "--config", os.path.join(tmp, "own.toml")).stdout or "{}")
    check("a config's recompute-modules in Megatron's list spelling is the flag's", act(own) == act(up), [act(own), act(up)])

emit = run("plan", *BASE, "--recompute", "selective", "--recompute-modules", "mla_up_proj,moe_act", "--emit", "megatron")
check("--emit megatron writes --recompute-granularity selective --recompute-modules mla_up_proj moe_act",
      emit.returncode == 0 and "--recompute-granularity selective" in emit.stdout
      and "--recompute-modules mla_up_proj moe_act" in " ".join(emit.stdout.replace("\\\n", " ").split()), emit.stdout[-1500:] + emit.stderr[-500:])

bad = run("plan", *BASE, "--recompute", "selective", "--recompute-modules", "mla_up,moe")
check("an unknown module and an unmodelled one: exit 2, both named", bad.returncode == 2
      and "--recompute-modules 'mla_up' is unknown" in bad.stderr and "mla_up_proj" in bad.stderr, bad.stderr)
unmodelled = run("plan", *BASE, "--recompute", "selective", "--recompute-modules", "moe,shared_experts")
check("moe and shared_experts are refused as not modelled, both", unmodelled.returncode == 2
      and "--recompute-modules moe: Megatron's moe checkpoint is not modelled" in unmodelled.stderr
      and "shared_experts" in unmodelled.stderr, unmodelled.stderr)
dense = run("plan", "--model", "llama3-8b", "--cluster", "dgx-b200", "--nodes", "1", "--tp", "1", "--pp", "1", "--dp", "8",
            "--global-batch-size", "64", "--recompute", "selective", "--recompute-modules", "mla_up_proj,moe_act")
check("a dense model without MLA refuses mla_up_proj and moe_act by name", dense.returncode == 2
      and "mla_up_proj: the model has no multi-head latent attention" in dense.stderr
      and "moe_act: the model has no routed experts" in dense.stderr, dense.stderr)
nosel = run("plan", *BASE, "--recompute", "full", "--recompute-modules", "mla_up_proj")
check("modules with --recompute full are refused", nosel.returncode == 2
      and "--recompute-modules mla_up_proj with --recompute full" in nosel.stderr, nosel.stderr)
finish()
