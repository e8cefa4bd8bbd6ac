"""plan marks whether `trident train` can rehearse the recipe it recommends: the runtime's own run
check decides. A dense GPT recipe is rehearsable, with the stack settings a CPU rank replaces
named (bf16 -> fp32); so is the Mixtral recipe with expert and context parallelism, and with
shared experts, and on the zb-h1 schedule (the MoE layer's split backward); a recipe with what
the runtime lacks (full recomputation on zb-h1, whose weight pass needs the activations it drops)
is not, and says why by the run check's codes, in JSON and in the text report."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]


def plan(*args):
    p = subprocess.run([trident, "plan", "--json", "--top", "1", *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"FAIL plan {' '.join(args)}: exit {p.returncode}\n{p.stdout[-800:]}\n{p.stderr[-800:]}")
    return json.loads(p.stdout)


dense = plan("--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g", "--nodes", "2", "--global-batch-size", "64", "--zero", "1")
r = dense.get("rehearsal", {})
check("a dense GPT recipe is rehearsable", r.get("rehearsable") is True and r.get("refusals") == [], r)
check("the CPU's substitutions are named", any(s.startswith("precision bf16 -> fp32") for s in r.get("substitutions", [])), r)

moe_args = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch-size", "256", "--ep", "4"]
moe = plan(*moe_args)
r = moe.get("rehearsal", {})
check("the Mixtral recipe with ep (and cp, dropping tokens) is rehearsable on CPU ranks",
      r.get("rehearsable") is True and r.get("refusals") == [], r)

shared = plan(*moe_args, "--shared-experts", "1")
r = shared.get("rehearsal", {})
check("so is it with shared experts", r.get("rehearsable") is True and r.get("refusals") == [], r)

# zb-h1 under the runtime's own stack: Megatron (the GPU cluster's default stack) has no zero-bubble schedule.
zb = ["--schedule", "zb-h1", "--stack", "trident"]
r = plan(*moe_args, *zb).get("rehearsal", {})
check("so is it on the zb-h1 schedule (the MoE layer's split backward)",
      r.get("rehearsable") is True and r.get("refusals") == [], r)

# What the runtime lacks is refused by the run check's codes: zb-h1 with full recomputation (its
# weight pass needs the activations full recomputation drops).
lacking = [*moe_args, *zb, "--recompute", "full"]
r = plan(*lacking).get("rehearsal", {})
codes = {x["code"] for x in r.get("refusals", [])}
check("a zb-h1 recipe with full recomputation is marked not rehearsable", r.get("rehearsable") is False, r)
check("with the run check's reason", "train-zb-h1" in codes, codes)
check("each reason has a fix", all(x["fix"] for x in r.get("refusals", [])), r)

text = subprocess.run([trident, "plan", *lacking], capture_output=True, text=True, timeout=300).stdout
check("the text report says so too", "rehearsal: not rehearsable" in text and "[train-zb-h1]" in text, text[-600:])
text = subprocess.run([trident, "plan", *moe_args], capture_output=True, text=True, timeout=300).stdout
check("and says the Mixtral recipe trains", "rehearsal: every setting of this recipe trains" in text, text[-600:])

finish()
