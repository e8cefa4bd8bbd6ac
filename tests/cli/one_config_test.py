"""One config for every command: `trident plan --emit FILE.toml` runs unchanged in lint, topo,
simulate and plan with the same predictions, and scaled down by flags in train; --emit megatron /
torchtitan print the winner's layout in those frameworks' names; --train-tokens adds up."""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]


def run(*args, want=0):
    p = subprocess.run([trident, *args], capture_output=True, text=True)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}, want {want}\n{p.stdout}\n{p.stderr}")
    return p


tmp = tempfile.mkdtemp()
emitted = os.path.join(tmp, "best.toml")
plan_cfg = os.path.join(root, "examples", "plan-gpt3-175b-512-dgx-a100.toml")
budget = ["--train-tokens", "300e9", "--gpu-hour-cost", "2.5"]
plan = json.loads(run("plan", "--config", plan_cfg, "--json", "--emit", emitted, *budget).stdout)
best = plan["candidates"][0]
step, layout = best["time_s"]["step"], best["layout"]
cfg = tomllib.load(open(emitted, "rb"))
check("emitted file holds the winner's layout",
      [cfg["layout"][k] for k in ("tp", "pp", "dp")] == [layout[k] for k in ("tp", "pp", "dp")], (cfg, layout))

lint = json.loads(run("lint", "--config", emitted, "--json").stdout)
check("lint of the file predicts plan's step", abs(lint["time_s"]["step"] - step) < 1e-6 * step,
      (lint["time_s"]["step"], step))
check("lint of the file predicts plan's memory", lint["memory_gib"]["total"] == best["memory_gib"]["total"],
      (lint["memory_gib"], best["memory_gib"]))
sim = json.loads(run("simulate", "--config", emitted, "--json").stdout)
check("simulate of the file: planner step = plan's", abs(sim["planner_step_s"] - step) < 1e-6 * step,
      (sim["planner_step_s"], step))
check("simulate of the file: its own step within 20% of the planner's", abs(sim["step_s"] / step - 1) < 0.2,
      (sim["step_s"], step))
topo = json.loads(run("topo", "--config", emitted, "--json").stdout)
check("topo of the file: same world", topo["world"] == layout["tp"] * layout["pp"] * layout["dp"], topo.get("world"))
replan = json.loads(run("plan", "--config", emitted, "--json", "--top", "1").stdout)
check("plan of the file finds the same step", abs(replan["candidates"][0]["time_s"]["step"] - step) < 1e-6 * step)
p = run("topo", "--config", emitted)
check("keys a command does not use are named, not silent", "not used by this command" in p.stderr, p.stderr)

# train: the same file, scaled down by flags (flags win over the file). train honours or refuses
# every key it reads: one pipeline stage needs a one-stage schedule, and the CPU trains in fp32
# with ZeRO 0 or 1, unfused attention, fp32 gradients and DP overlap only (the GPU stack the plan
# predicted replaced), so the scaled-down run says so.
p = run("train", "--config", emitted, "--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "16",
        "--vocab", "256", "--tp", "1", "--pp", "1", "--dp", "1", "--global-batch-size", "2", "--micro-batch-size", "2",
        "--schedule", "1f1b", "--virtual-stages", "1", "--precision", "fp32", "--zero", "0", "--recompute", "none",
        "--no-sequence-parallel", "--grad-bits", "32", "--attention", "unfused", "--overlap", "dp",
        "--steps", "1", "--eval-batches", "1", "--threads", "1")
check("train runs the file scaled down", "done: 1 steps" in p.stdout, p.stdout[-500:])

# time to train: the formula's inputs give its outputs.
t = plan["time_to_train"]
steps = math.ceil(300e9 / (1536 * 2048))
check("time to train: steps", t["steps"] == steps, (t["steps"], steps))
check("time to train: GPU-hours", abs(t["gpu_hours"] - steps * step * 4096 / 3600) < 1e-6 * t["gpu_hours"], t)
check("time to train: days and cost", abs(t["days"] - steps * step / 86400) < 1e-6 * t["days"]
      and abs(t["cost"] - 2.5 * t["gpu_hours"]) < 1e-6 * t["cost"], t)
lt = json.loads(run("lint", "--config", emitted, "--json", "--train-tokens", "300e9").stdout)["time_to_train"]
check("lint: same time to train as plan", abs(lt["seconds"] - t["seconds"]) < 1e-6 * t["seconds"], (lt, t))
run("plan", "--config", plan_cfg, "--gpu-hour-cost", "2", want=2)
run("plan", "--config", plan_cfg, "--train-tokens", "-5", want=2)
run("plan", "--config", plan_cfg, "--emit", "plan.yaml", want=2)
run("plan", "--config", plan_cfg, "--ep", "8", want=2)  # a dense model has no experts: refused, not dropped
run("lint", "--config", emitted, "--html", emitted, want=2)  # an output never replaces the input
check("the config survives an --html aimed at it", tomllib.load(open(emitted, "rb")) == cfg)


def args_of(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("--"):
            words = line.rstrip(" \\").split()
            out[words[0]] = words[1] if len(words) > 1 else True
    return out


# Megatron: the chapter's layout (tp 8, pp 8, tp-pp-dp, selective recompute, SP).
fixed = os.path.join(root, "examples", "gpt3-175b-4096-a100.toml")
m = args_of(run("plan", "--config", fixed, "--emit", "megatron").stdout)
expect = {"--tensor-model-parallel-size": "8", "--pipeline-model-parallel-size": "8", "--micro-batch-size": "1",
          "--global-batch-size": "1536", "--recompute-granularity": "selective", "--num-layers": "96",
          "--hidden-size": "12288", "--num-attention-heads": "96", "--seq-length": "2048"}
check("megatron: the example's sizes", all(m.get(k) == v for k, v in expect.items()), m)
check("megatron: switches", all(k in m for k in ("--sequence-parallel", "--bf16", "--use-tp-pp-dp-mapping")), m)
m = args_of(run("plan", "--config", plan_cfg, "--emit", "megatron").stdout)
chunks = layout["pp"] * layout.get("virtual_stages", 1)
check("megatron: the winner's layout", m["--tensor-model-parallel-size"] == str(layout["tp"])
      and m["--pipeline-model-parallel-size"] == str(layout["pp"]), (m, layout))
if layout.get("schedule") == "interleaved":
    check("megatron: interleaved chunks", m.get("--num-layers-per-virtual-pipeline-stage") == str(96 // chunks), m)
m = args_of(run("plan", "--model", "llama3-8b", "--nodes", "2", "--global-batch-size", "64", "--zero", "1",
                "--emit", "megatron").stdout)
check("megatron: llama GQA, SwiGLU, RMSNorm, distributed optimizer",
      m.get("--num-query-groups") == "8" and m.get("--normalization") == "RMSNorm" and "--swiglu" in m
      and "--use-distributed-optimizer" in m, m)

# torchtitan (its TOML form) runs ZeRO-3 (FSDP): the torchtitan stack plans what it runs.
tt = tomllib.loads(run("plan", "--config", fixed, "--stack", "torchtitan", "--emit", "torchtitan-toml").stdout)
par = tt["parallelism"]
check("torchtitan: degrees", (par["tensor_parallel_degree"], par["pipeline_parallel_degree"],
                              par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]) == (8, 8, 64), par)
check("torchtitan: schedule, recompute, batch",
      par["pipeline_parallel_schedule"] == "1F1B" and tt["activation_checkpoint"]["mode"] == "selective"
      and tt["training"]["global_batch_size"] == 1536 and tt["training"]["local_batch_size"] == 1536 // 64
      and tt["training"]["seq_len"] == 2048, tt)

# --help: every option of the table shows its value type and default, switches say so.
for command in ("plan", "lint", "simulate", "topo", "train"):
    text = run(command, "--help").stdout
    lines = []
    for l in text.splitlines():  # an option and its wrapped description make one entry
        if l.strip().startswith("--"):
            lines.append(l.strip())
        elif lines and l.startswith("      ") and l.strip():
            lines[-1] += " " + l.strip()
    untyped = [l for l in lines if not re.match(r"--[a-z0-9-]+(,!--no-[a-z0-9-]+)? \S+=\S", l) and "(switch, default" not in l
               and not re.match(r"--(config|emit|html|json|all|trace|svg|show-schedule)\b", l)]
    # An OptionDef without its type and default shows CLI11's fallback "TEXT=none".
    untyped += [l for l in lines if " TEXT=none" in l]
    check(f"{command} --help: types and defaults", not untyped, untyped)
h = run("plan", "--help").stdout
check("--help shows e.g. --tp INT=1 and the schedule choices",
      re.search(r"--tp INT=1\b", h) and "--schedule gpipe|1f1b|interleaved|zb-h1=1f1b" in h, h[:400])

# A model from a Hugging Face config round-trips too: the emitted file names the config by an
# absolute path (given relative here), so it plans the same from any folder.
hf_rel = os.path.relpath(os.path.join(root, "data", "models", "hf", "qwen3-30b-a3b.json"))
hf_args = ["--hf-config", hf_rel, "--cluster", "dgx-h100", "--nodes", "8", "--global-batch-size", "512"]
hf_emitted = os.path.join(tmp, "sub", "qwen3.toml")
os.makedirs(os.path.dirname(hf_emitted))
hf_plan = json.loads(run("plan", *hf_args, "--json", "--top", "1", "--emit", hf_emitted).stdout)["candidates"][0]
elsewhere = subprocess.run([trident, "plan", "--config", "qwen3.toml", "--json", "--top", "1"], capture_output=True,
                           text=True, cwd=os.path.dirname(hf_emitted))
check("an --hf-config plan's file plans from another folder", elsewhere.returncode == 0, elsewhere.stderr)
if elsewhere.returncode == 0:
    again = json.loads(elsewhere.stdout)["candidates"][0]
    check("... the same layout", again["layout"] == hf_plan["layout"], (again["layout"], hf_plan["layout"]))
    check("... the same step and memory", abs(again["time_s"]["step"] - hf_plan["time_s"]["step"]) < 1e-9 * hf_plan["time_s"]["step"]
          and again["memory_gib"] == hf_plan["memory_gib"], (again["time_s"], hf_plan["time_s"]))
    check("... the same model FLOPs", again["model_flops"] == hf_plan["model_flops"])

finish()
