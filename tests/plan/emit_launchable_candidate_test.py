"""--emit megatron launches the best candidate Megatron-LM runs as predicted: when the search's
best is refused by the framework (here the trident stack's DP overlap behind one micro-batch in
the interleaved schedule) and a later candidate is not, that one is launched, its rank and the
refused ones named in the launch's comments; when every candidate is refused, exit 2 with the
first one's refusals.
usage: emit_launchable_candidate_test.py TRIDENT"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
ARGS = ["--model", "gpt3-13b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "512",
        "--stack", "trident"]


def run(*args):
    return subprocess.run([trident, "plan", *args], capture_output=True, text=True)


plan = json.loads(run(*ARGS, "--json").stdout)
cands = plan["candidates"]
first, second = cands[0], cands[1]
check("the best is interleaved", first["layout"]["schedule"] == "interleaved", first["layout"]["schedule"])
launch = run(*ARGS, "--emit", "megatron")
check("--emit megatron exits 0 with a launchable candidate", launch.returncode == 0, launch.stderr[:300])
text = launch.stdout
check("the refused best is named with its refusal",
      "candidate 1 (" in text and "passed over: Megatron-LM refuses it (DP overlap behind one micro-batch" in text)
check("the launch says which candidate it is", "this launch is candidate 2 of the plan" in text)
lay = second["layout"]
check(f"the launch is candidate 2's layout tp {lay['tp']} pp {lay['pp']}",
      f"--tensor-model-parallel-size {lay['tp']}" in text and f"--pipeline-model-parallel-size {lay['pp']}" in text)
# Every candidate refused (the stack's settings, not the layout): exit 2 naming the refusal.
refused = run("--model", "gpt3-175b", "--cluster", "dgx-h100", "--nodes", "16", "--global-batch-size", "512",
              "--stack", "trident", "--emit", "megatron")
check("all refused: exit 2 with the refusal",
      refused.returncode == 2 and "cannot run the planned job as predicted" in refused.stderr, str(refused.returncode))
finish()
