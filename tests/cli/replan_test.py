"""trident replan: the best layout for the GPUs that are left, from a plan (its config file, or
`plan --json`'s output) or the run's last checkpoint, with a stated batch policy; the slowdown
against the original; the checkpoint resharded into the new layout, and trained from there.
Usage: replan_test.py TRIDENT MPIRUN"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

t, mpirun = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


def run(*args, want=0):
    p = subprocess.run([t, *args], capture_output=True, text=True, env=env)
    check(f"exit {want}: {' '.join(args[:2])} ... {' '.join(args[-3:])}", p.returncode == want,
          p.stdout[-1500:] + p.stderr[-1500:])
    return p


# Llama 3 70B on 64 DGX H100 nodes: the plan, then two nodes lost.
cfg = os.path.join(tmp, "plan.toml")
plan = json.loads(run("plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size",
                      "1024", "--top", "1", "--json", "--emit", cfg).stdout)
old = plan["candidates"][0]
r = json.loads(run("replan", "--config", cfg, "--lost-nodes", "node[003,017]", "--json").stdout)
check("survivors: 62 nodes = 496 GPUs", (r["survivors"]["nodes"], r["survivors"]["gpus"]) == (62, 496), r["survivors"])
check("the original is the plan's (same step time)", abs(r["original"]["step_s"] - old["time_s"]["step"]) < 1e-5 * old["time_s"]["step"],
      (r["original"], old["time_s"]))
new = r["replan"]
check("keep: the same global batch", new["global_batch_size"] == 1024 and r["global_batch_after"] == 1024, new)
check("on at most the survivors", new["gpus"] <= 496 and new["gpus"] == 8 * r["nodes_used"], new)
check("slowdown = new step / old step", abs(r["step_ratio"] - new["step_s"] / r["original"]["step_s"]) < 1e-12, r)
check("fewer GPUs, slower", r["throughput_ratio"] < 1, r)
# The replan's layout is what `plan` finds on the nodes it uses (the same search, the same numbers).
check_plan = json.loads(run("plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", str(r["nodes_used"]),
                            "--global-batch-size", "1024", "--top", "1", "--json").stdout)["candidates"][0]
check("the replan's layout is plan's best on the nodes used", abs(check_plan["tokens_per_s"] - new["tokens_per_s"])
      < 1e-6 * new["tokens_per_s"], (check_plan["layout"]["description"], new["layout"]))

# scale: the batch by the nodes used, the learning rate by the rule.
for rule in ("linear", "sqrt"):
    s = json.loads(run("replan", "--config", cfg, "--gpus-left", "450", "--batch", "scale", "--lr-rule", rule,
                       "--json").stdout)
    b, b2 = s["global_batch_before"], s["global_batch_after"]
    check(f"scale ({rule}): 450 GPUs = 56 whole nodes, 2 idle", (s["survivors"]["nodes"], s["survivors"]["idle_gpus"]) == (56, 2), s)
    check(f"scale ({rule}): B' <= B x nodes used / 64", b2 <= b * s["nodes_used"] // 64, (b, b2, s["nodes_used"]))
    want = b2 / b if rule == "linear" else math.sqrt(b2 / b)
    check(f"scale ({rule}): lr x {want:.4f}", abs(s["lr_factor"] - want) < 1e-12, s["lr_factor"])
text = run("replan", "--config", cfg, "--nodelist", "node[001-056]").stdout
check("text: was, now, batch policy, slowdown", all(w in text for w in ("was:", "now:", "--batch keep", "slowdown:")), text)

# From `plan --json`'s output, the model and cluster given by flags.
pj = os.path.join(tmp, "plan.json")
open(pj, "w").write(json.dumps(plan))
r2 = json.loads(run("replan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--plan-json", pj,
                    "--lost-nodes", "node[003,017]", "--json").stdout)
check("--plan-json gives the same replan as the config", r2["replan"] == r["replan"], (r2["replan"], r["replan"]))

# Bad input: exit 2 with the value and a fix.
for args, needle in [([], "exactly one of --gpus-left"), (["--gpus-left", "8", "--lost-nodes", "a"], "(2 given)"),
                     (["--gpus-left", "8", "--lr-rule", "sqrt"], "--batch keep keeps both"),
                     (["--lost-nodes", "node[5-3]"], "node[5-3]"), (["--gpus-left", "512"], "--gpus-left 512"),
                     (["--gpus-left", "8", "--batch", "half"], "--batch 'half'")]:
    p = run("replan", "--config", cfg, *args, want=2)
    check(f"refused: {args}", needle in p.stderr and "fix:" in p.stderr, p.stderr)

# A checkpoint of a small run on 1 process, replanned onto what is left of a 4-node cluster of 2
# CPU "GPUs" each (the cluster file as `trident bench` writes it), then resumed there under mpirun.
cluster = os.path.join(tmp, "cpu.toml")
open(cluster, "w").write('[cluster]\nnodes = 4\ngpus-per-node = 2\ngpu-memory-gib = 4\ngpu-fp32-tflops = 0.05\n'
                         'gpu-bf16-tflops = 0.05\ngpu-hbm-gbytes-per-s = 20\nintra-link = "pcie"\nintra-gbytes-per-s = 5\n'
                         'intra-latency-us = 1\ninter-link = "ethernet"\ninter-node-gbytes-per-s = 10\ninter-latency-us = 10\n')
ck = os.path.join(tmp, "small.ckpt")
run("train", "--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--global-batch-size", "4",
    "--micro-batch-size", "1", "--steps", "8", "--stop-at", "4", "--threads", "1", "--checkpoint", ck)
new_cfg = os.path.join(tmp, "survivors.toml")
p = run("replan", "--config", cluster, "--from-checkpoint", ck, "--tp", "2", "--pp", "2", "--dp", "2", "--precision",
        "fp32", "--stack", "trident", "--lost-nodes", "n1", "--emit", new_cfg)
check("the checkpoint reshards into the new layout, resuming at step 5", "reshards into the new layout" in p.stdout
      and "resumes at step 5" in p.stdout, p.stdout)
j = json.loads(run("replan", "--config", cluster, "--from-checkpoint", ck, "--tp", "2", "--pp", "2", "--dp", "2",
                   "--precision", "fp32", "--stack", "trident", "--lost-nodes", "n1", "--json").stdout)
ranks = j["replan"]["gpus"]
check("checkpoint JSON: reshards, step 4", j["checkpoint"]["reshards"] is True and j["checkpoint"]["step"] == 4, j["checkpoint"])
# The proof: train resumes from the checkpoint in the new layout (its ranks, its config) and
# reaches the end; the first resumed step is step 5.
p = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), t, "train",
                    "--config", new_cfg, "--resume", ck, "--steps", "8", "--threads", "1", "--eval-batches", "1"],
                   capture_output=True, text=True, env=env, timeout=300)
check(f"train --config the replan --resume the checkpoint on {ranks} ranks: steps 5..8", p.returncode == 0
      and re.search(r"resume +from .* at step 4", p.stdout) and re.search(r"step +5/8", p.stdout)
      and re.search(r"step +8/8", p.stdout), p.stdout[-2500:] + p.stderr[-2500:])
# A checkpoint of another model than the plan's is refused.
p = run("replan", "--config", cluster, "--from-checkpoint", ck, "--layers", "4", "--hidden", "32", "--heads", "2",
        "--seq-len", "16", "--tp", "2", "--pp", "2", "--dp", "2", "--lost-nodes", "n1", want=2)
check("another model than the checkpoint's is refused", "holds another model" in p.stderr, p.stderr)
finish()
