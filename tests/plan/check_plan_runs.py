"""A plan is a job that can run (issue 51 item 2): the winner passes its own lint (no error
finding), nothing valid left exits 1 naming why, the stack's schedules and gradient reduction are
ones its framework runs (so `--emit megatron` takes the megatron-core-te winner), a refusal's fix
leads to the best valid layout, lint takes plan's defaults for the same layout, and every emitted
launch names its model."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
BASE = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size", "1000"]
LLAMA = BASE + ["--stack", "megatron-core-te"]


def run(*args):
    return subprocess.run([trident, *args], capture_output=True, text=True, timeout=300)


def plan_json(*args):
    p = run("plan", "--json", *args)
    return p, (json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout.strip() else {})


def errors(candidate):
    return [f["code"] for f in candidate.get("findings", []) if f["severity"] == "error"]


# 1. The winner (and every listed candidate) passes its own lint, whatever the search is asked.
for what, job in [("megatron-core-te at global batch 1000", LLAMA),
                 ("the same with --schedule interleaved (was tp 32 across 4 nodes, 6.3% MFU)",
                  LLAMA + ["--schedule", "interleaved"]),
                 ("gpt3-175b on 512 DGX A100", ["--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--nodes", "512",
                                                "--global-batch-size", "1536"])]:
    p, j = plan_json(*job, "--top", "5")
    cands = j.get("candidates", [])
    bad = [(c["layout"]["description"], errors(c)) for c in cands if errors(c)]
    check(f"{what}: no candidate with a lint error", p.returncode in (0, 1) and not bad,
          f"exit {p.returncode}: {bad} {p.stderr[-300:]}")
    check(f"{what}: exit 0 only with a candidate", (p.returncode == 0) == bool(cands), p.returncode)
    text = run("plan", *job, "--top", "1").stdout
    check(f"{what}: the text report shows no error finding", "error[" not in text, text[-800:])

# Nothing valid left: TP fixed across nodes exits 1 and says which rule rejected it.
p = run("plan", *LLAMA, "--tp", "16")
check("--tp 16 on 8-GPU nodes: exit 1", p.returncode == 1, f"exit {p.returncode}\n{p.stdout[-600:]}{p.stderr[-600:]}")
check("naming the lint error that rejected every candidate", "tp-crosses-nodes" in p.stdout, p.stdout[-900:])

# 2. The stack runs what the search picks: no zb-h1 (nor gpipe) under megatron-core-te, so the
# Megatron launch of the winner is written (before: exit 2, "no zero-bubble schedule").
p, j = plan_json(*LLAMA, "--top", "3")
scheds = [c["layout"]["schedule"] for c in j.get("candidates", [])]
check("megatron-core-te candidates use Megatron's schedules only", scheds and set(scheds) <= {"1f1b", "interleaved"},
      scheds)
for form in ("megatron", "slurm"):
    p = run("plan", *LLAMA, "--emit", form)
    check(f"--emit {form} writes the megatron-core-te winner at global batch 1000", p.returncode == 0 and p.stdout.strip(),
          f"exit {p.returncode}: {p.stderr[-500:]}")
p, j = plan_json(*BASE, "--stack", "torchtitan", "--top", "3")
scheds = [c["layout"]["schedule"] for c in j.get("candidates", [])]
check("torchtitan candidates avoid zb-h1 (its zero-bubble schedules need several chunks)", "zb-h1" not in scheds, scheds)

# fp16 keeps fp32 gradient reduction under the Megatron stacks: the launch is written.
p, j = plan_json(*LLAMA, "--precision", "fp16", "--top", "1")
c = (j.get("candidates") or [{}])[0]
check("fp16 under megatron-core-te reduces gradients in fp32", c.get("layout", {}).get("grad_bits") == 32, c.get("layout"))
p = run("plan", *LLAMA, "--precision", "fp16", "--emit", "megatron")
check("and --emit megatron takes it (before: 'Megatron reduces gradients in fp32 or bf16 only')",
      p.returncode == 0 and "--fp16" in p.stdout and "--accumulate-allreduce-grads-in-fp32" in p.stdout,
      f"exit {p.returncode}: {p.stderr[-400:]}")
p, j = plan_json(*BASE, "--stack", "deepspeed", "--precision", "fp16", "--top", "1")
c = (j.get("candidates") or [{}])[0]
check("DeepSpeed keeps its 16-bit fp16 reduction", c.get("layout", {}).get("grad_bits") == 16, c.get("layout"))

# 3. A refusal's fix leads to a layout at least as good as the best valid one.
_, best = plan_json(*LLAMA, "--top", "1")
best_tps = best["candidates"][0]["tokens_per_s"]
p = run("plan", *LLAMA, "--schedule", "zb-h1")
check("zb-h1 under megatron-core-te is refused as input (exit 2)", p.returncode == 2 and "stack-schedule" not in p.stdout
      and "zb-h1" in p.stderr, f"exit {p.returncode}: {p.stderr[-500:]}")
fixes = [l for l in p.stderr.splitlines() if "fix:" in l]
check("its fix says to leave --schedule out", any("leave --schedule out" in f for f in fixes), fixes)
# Each --schedule the fix names, planned, is at least as good as the best valid candidate.
named = [s for s in ("1f1b", "interleaved", "gpipe") if any(f"--schedule {s}" in f for f in fixes)]
for s in named:
    _, j = plan_json(*LLAMA, "--schedule", s, "--top", "1")
    tps = (j.get("candidates") or [{"tokens_per_s": 0}])[0]["tokens_per_s"]
    check(f"the offered --schedule {s} is as good as the best valid layout", tps >= best_tps * (1 - 1e-9),
          f"{tps} < {best_tps}")
p = run("plan", *BASE, "--stack", "trident", "--schedule", "zb-h1", "--emit", "megatron")
check("--emit megatron with a zb-h1 fixed by hand is refused up front, the fix leaving --schedule out",
      p.returncode == 2 and "leave --schedule out" in p.stderr, f"exit {p.returncode}: {p.stderr[-500:]}")

# 4. lint takes plan's defaults: the plan's tp 8 layout with its recipe given but for sequence
# parallel has the same memory in lint as in plan (before: sequence parallel off in lint only).
args = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size", "1024"]
_, j = plan_json(*args, "--tp", "8", "--pp", "8", "--top", "1")
lay = j["candidates"][0]["layout"]
given = ["--tp", "8", "--pp", "8", "--dp", str(lay["dp"]), "--order", lay["order"], "--micro-batch-size",
         str(lay["micro_batch_size"]), "--schedule", lay["schedule"], "--virtual-stages", str(lay["virtual_stages"]),
         "--zero", str(lay["zero"]), "--recompute", lay["recompute"]]
p = run("lint", *args, *given, "--json")
lint = json.loads(p.stdout) if p.stdout.strip() else {}
lint_mem = lint.get("estimate", lint).get("memory_gib", {}).get("total") if isinstance(lint, dict) else None
check("plan picked sequence parallel at tp 8", lay["sequence_parallel"] is True, lay)
check("lint of that layout without --sequence-parallel takes it on, as plan does (same memory)",
      lint_mem is not None and abs(lint_mem - j["candidates"][0]["memory_gib"]["total"]) < 1e-6,
      f"lint {lint_mem} GiB vs plan {j['candidates'][0]['memory_gib']['total']} GiB; exit {p.returncode}")

# 5. Every emitted launch names the model: the torchtitan sbatch in flag form (whose model comes
# from a Python config) stops before srun unless MODEL_ARGS names it, and says which model.
script = run("plan", *BASE, "--stack", "torchtitan", "--emit", "slurm-torchtitan").stdout
check("the flag-form sbatch is written", script.startswith("#!/bin/bash"), script[:300])
with tempfile.TemporaryDirectory() as d:
    for tool in ("srun", "scontrol"):
        with open(os.path.join(d, tool), "w") as f:
            f.write("#!/bin/sh\necho \"$(basename $0) $*\" >> %s/calls\n" % d)
        os.chmod(os.path.join(d, tool), 0o755)
    path = os.path.join(d, "job.sbatch")
    with open(path, "w") as f:
        f.write(script)
    env = dict(os.environ, PATH=d + ":" + os.environ["PATH"], SLURM_JOB_NODELIST="n1", SLURM_NNODES="64",
               SLURM_JOB_ID="1")
    env.pop("MODEL_ARGS", None)
    r = subprocess.run(["bash", path], capture_output=True, text=True, env=env, timeout=60)
    calls = open(os.path.join(d, "calls")).read() if os.path.exists(os.path.join(d, "calls")) else ""
    check("without MODEL_ARGS the job stops before srun, naming the model", r.returncode != 0 and "srun" not in calls
          and "llama3-70b" in r.stderr, f"exit {r.returncode}; calls {calls!r}; {r.stderr[-300:]}")
    env["MODEL_ARGS"] = "--model.name llama3 --model.flavor 70B"
    r = subprocess.run(["bash", path], capture_output=True, text=True, env=env, timeout=60)
    calls = open(os.path.join(d, "calls")).read() if os.path.exists(os.path.join(d, "calls")) else ""
    # (What the script does after srun, the requeue until the last step is saved, is not this test's.)
    check("with MODEL_ARGS it starts torchrun with them", "srun" in calls and "--model.flavor 70B" in calls,
          f"exit {r.returncode}; {calls!r} {r.stderr[-300:]}")

finish()
