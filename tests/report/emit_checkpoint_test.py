"""Launches that survive failures: plan --emit megatron / torchtitan / slurm save where
--checkpoint-dir says (default: checkpoints, under the folder the job starts in), load from there,
save at the plan's Young/Daly interval (the goodput's interval_steps), stop before the job's time
limit (--time, else the predicted time with failures capped at 48 h), and the sbatch script asks
Slurm to requeue on node failure and requeues itself until the last step is saved.
(emit_frameworks_test.py checks that every flag and key is the framework's own.)
Usage: emit_checkpoint_test.py TRIDENT"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

t = sys.argv[1]


def run(*args, want=0):
    p = subprocess.run([t, *args], capture_output=True, text=True)
    check(f"exit {want}: plan {' '.join(args[-4:])}", p.returncode == want, p.stdout[-800:] + p.stderr[-800:])
    return p


PLAN = ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size", "1024",
        "--train-tokens", "15e12", "--top", "1"]
good = json.loads(run(*PLAN, "--json").stdout)["goodput"]
n = good["interval_steps"]
check("the plan has a save interval", n > 1, good)


def args_of(text):
    words = shlex.split(" ".join(l.rstrip("\\ ") for l in text.splitlines() if not l.startswith(("#", "export"))))
    return words


# Megatron: --save/--load the folder, --save-interval the plan's interval, exit before the limit.
meg = args_of(run(*PLAN, "--emit", "megatron").stdout)
pairs = {meg[i]: meg[i + 1] if i + 1 < len(meg) and not meg[i + 1].startswith("--") else True for i in range(len(meg))
         if meg[i].startswith("--")}
check("megatron: --save and --load checkpoints", pairs.get("--save") == "checkpoints" and pairs.get("--load") == "checkpoints",
      pairs)
check(f"megatron: --save-interval {n} (the Young/Daly interval)", pairs.get("--save-interval") == str(n), pairs)
check("megatron: --exit-signal-handler", pairs.get("--exit-signal-handler") is True, pairs)
# Default limit: 300 days predicted -> capped at 48 h; Megatron exits before it.
exit_min = int(pairs.get("--exit-duration-in-mins", "0"))
check("megatron: exits (after saving) before the 48 h limit", 2800 < exit_min < 48 * 60, exit_min)

# --checkpoint-dir and --time are honoured.
meg = args_of(run(*PLAN, "--emit", "megatron", "--checkpoint-dir", "/lustre/run1", "--time", "12:00:00").stdout)
check("megatron: --checkpoint-dir honoured", "/lustre/run1" in meg and meg[meg.index("--save") + 1] == "/lustre/run1", meg[-12:])
exit_min = int(meg[meg.index("--exit-duration-in-mins") + 1])
check("megatron: --time 12:00:00 -> exits a few minutes before 720", 700 <= exit_min < 720, exit_min)

# The sbatch script: time limit, requeue, the same interval, the requeue-until-done lines; bash -n.
script = run(*PLAN, "--emit", "slurm", "--time", "1-00:00:00").stdout
check("slurm: #SBATCH --time=1-00:00:00", "#SBATCH --time=1-00:00:00\n" in script, script[:600])
check("slurm: #SBATCH --requeue", "#SBATCH --requeue\n" in script, script[:600])
check("slurm: --save-interval in the plan's arguments", f"--save-interval {n}" in script, script)
check("slurm: requeues itself until the last step is saved",
      "latest_checkpointed_iteration.txt" in script and 'scontrol requeue "$SLURM_JOB_ID"' in script, script[-600:])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "job.sbatch")
    open(path, "w").write(script)
    syntax = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check("slurm: bash -n", syntax.returncode == 0, syntax.stderr)
    # The requeue decision itself, run with a fake scontrol: requeue while the last save is short of the end.
    tail = script[script.index("# Until the last step is saved"):]
    os.makedirs(os.path.join(d, "checkpoints"))
    os.makedirs(os.path.join(d, "bin"))
    open(os.path.join(d, "bin", "scontrol"), "w").write("#!/bin/sh\necho \"requeue $*\"\n")
    os.chmod(os.path.join(d, "bin", "scontrol"), 0o755)
    env = dict(os.environ, PATH=os.path.join(d, "bin") + ":" + os.environ["PATH"], SLURM_JOB_ID="42", TRAIN_ITERS="100")
    for saved, want in (("40", True), ("100", False), ("release", False)):
        open(os.path.join(d, "checkpoints", "latest_checkpointed_iteration.txt"), "w").write(saved + "\n")
        out = subprocess.run(["bash", "-c", tail], cwd=d, env=env, capture_output=True, text=True).stdout
        check(f"slurm: last saved {saved} of 100 -> requeue {want}", ("requeue requeue 42" in out) == want, out)

# torchtitan: [checkpoint] enable, folder, interval (TOML and flags).
TT = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "64",
      "--zero", "3", "--stack", "torchtitan", "--top", "1"]
n8 = json.loads(run(*TT, "--json", "--train-tokens", "1e12").stdout)["goodput"]["interval_steps"]
doc = tomllib.loads(run(*TT, "--train-tokens", "1e12", "--emit", "torchtitan-toml").stdout)
check(f"torchtitan-toml: [checkpoint] enable, folder checkpoints, interval {n8}",
      doc.get("checkpoint") == {"enable": True, "folder": "checkpoints", "interval": n8}, doc.get("checkpoint"))
flags = run(*TT, "--train-tokens", "1e12", "--emit", "torchtitan").stdout
check("torchtitan: --checkpoint.enable true --checkpoint.interval",
      "--checkpoint.enable true" in flags and f"--checkpoint.interval {n8}" in flags, flags[-400:])
script = run(*TT, "--train-tokens", "1e12", "--emit", "slurm-torchtitan-toml").stdout
check("slurm-torchtitan-toml: --time, --requeue, requeue on torchtitan's step folders",
      "#SBATCH --time=" in script and "#SBATCH --requeue" in script and "outputs/checkpoints" in script, script[-800:])

# Refused: a bad --time, --time where nothing has a time limit, the options without a launch.
p = run(*PLAN, "--emit", "slurm", "--time", "soon", want=2)
check("bad --time names the value and the forms", "--time 'soon'" in p.stderr and "D-HH:MM:SS" in p.stderr, p.stderr)
p = run(*PLAN, "--time", "10:00:00", want=2)
check("--time without --emit is refused", "nothing is emitted" in p.stderr, p.stderr)
p = run(*PLAN[:-2], "--stack", "torchtitan", "--zero", "3", "--emit", "torchtitan", "--time", "10:00:00", want=2)
check("--time with --emit torchtitan (no limit to write) is refused", "slurm-torchtitan" in p.stderr, p.stderr)
p = run(*PLAN, "--emit", "megatron", "--checkpoint-dir", "a'b", want=2)
check("a quote in --checkpoint-dir is refused", "--checkpoint-dir" in p.stderr, p.stderr)
finish()
