"""What a new user trips over, each answered: a typo gets "did you mean" (flags, commands,
presets, config keys); a plan that finds nothing names the rule that rejected most candidates
and changes that fit (each planned again here); the top-N table merges candidates that differ
only in rank order; the NVL72 tp-crosses-nodes fix follows from the domain size; MFU names its
convention and gives both figures (plan, simulate; text and JSON), checked by hand."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()


def run(*args, want=None):
    p = subprocess.run([trident, *args], capture_output=True, text=True, timeout=300)
    if want is not None and p.returncode != want:
        raise SystemExit(f"FAIL trident {' '.join(args)}: exit {p.returncode}, wanted {want}\n{p.stdout[-1500:]}\n"
                         f"{p.stderr[-1500:]}")
    return p


# "Did you mean": a flag (its value named with it, in the order typed), a command, presets, keys.
p = run("plan", "--modle", "llama3-70b", "--nodes", "8", "--global-batch-size", "64", want=2)
check("a mistyped flag: exit 2, named with its value and the closest flag",
      "no flag --modle (given 'llama3-70b')" in p.stderr and "did you mean '--model'?" in p.stderr, p.stderr)
check("a mistyped flag: CLI11's reversed list is gone", "were not expected" not in p.stderr, p.stderr)
p = run("paln", "--model", "gpt3-1.3b", want=2)
check("a mistyped command: did you mean 'plan'", "unknown command 'paln'" in p.stderr and "'plan'" in p.stderr, p.stderr)
for flag, typo, right in (("--model", "llama3-70", "llama3-70b"), ("--cluster", "dgx-h10", "dgx-h100"),
                          ("--stack", "megatron-core", "megatron-core-te")):
    model = [] if flag == "--model" else ["--model", "gpt3-1.3b"]
    p = run("plan", *model, "--nodes", "1", "--global-batch-size", "64", flag, typo, want=2)
    check(f"a mistyped preset {flag} {typo}: did you mean '{right}'", f"did you mean '{right}'?" in p.stderr, p.stderr)
cfg = os.path.join(tmp, "typo.toml")
open(cfg, "w").write('model = "gpt3-1.3b"\nglobal_bach_size = 64\n[clustr]\nnodes = 1\n')
p = run("plan", "--config", cfg, want=2)
check("a mistyped config key: did you mean 'global_batch_size'", "did you mean 'global_batch_size'?" in p.stderr, p.stderr)
check("a mistyped config table: did you mean 'cluster'", "did you mean 'cluster'?" in p.stderr, p.stderr)

# No layout fits: an indivisible global batch. The rule named, and each change offered fits.
base = ["--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--nodes", "64", "--tp", "8", "--pp", "8"]
p = run("plan", *base, "--global-batch-size", "1537", want=1)
check("no fit: names the rule that rejected most candidates",
      "fail the rule: global batch not divisible by dp" in p.stdout, p.stdout[-1500:])
changes = re.findall(r"^  (--global-batch-size \d+)$", p.stdout, re.M)
check("no fit: offers the nearest global batch sizes that fit", changes, p.stdout[-1500:])
for c in changes:
    flag, value = c.split()
    check(f"no fit: the offered {c} plans a layout", run("plan", *base, flag, value, "--top", "1").returncode == 0)
j = json.loads(run("plan", *base, "--global-batch-size", "1537", "--json", want=1).stdout)
check("no fit (JSON): the rule and the changes", j.get("no_fit", {}).get("top_rule") == "global batch not divisible by dp"
      and [c for c in j["no_fit"]["changes_that_fit"] if c.startswith("--global")] == changes, j.get("no_fit"))

# Top-N: one layout shown once, its other rank orders merged into it (the top 5 here are all tp 1 x pp 1,
# which has one order: the first 20 hold layouts with several).
j = json.loads(run("plan", "--model", "gpt3-6.7b", "--cluster", "dgx-a100-80g", "--nodes", "2", "--global-batch-size",
                   "64", "--stack", "trident", "--top", "20", "--json", want=0).stdout)
def key(c):
    lay = dict(c["layout"])
    lay.pop("order"), lay.pop("description")
    return json.dumps(lay, sort_keys=True)
keys = [key(c) for c in j["candidates"]]
check("top-20: no two candidates differ only in rank order", len(set(keys)) == len(keys), keys)
check("top-20: merged orders are listed with their throughput",
      all(o["tokens_per_s"] <= c["tokens_per_s"] for c in j["candidates"] for o in c["other_orders"])
      and any(c["other_orders"] for c in j["candidates"]), [c["other_orders"] for c in j["candidates"]])

# NVL72: tp 16 on 72-GPU domains; the cause is that 16 does not divide 72.
nvl = os.path.join(root, "examples", "llama3-405b-gb200-nvl72.toml")
p = run("lint", "--config", nvl, "--hosts-per-nvlink-domain", "18", "--nodes", "144", "--dp", "18",
        "--global-batch-size", "288")
fix = re.search(r"\[tp-crosses-nodes\].*\n\s+fix: (.*)", p.stdout)
fix = fix.group(1) if fix else ""
check("NVL72: the fix names the cause (16 does not divide 72)", "tp 16 does not divide the 72 GPUs" in fix, p.stdout[-2000:])
check("NVL72: the tp values that divide the domain and the model's 128 heads", "--tp 2, 4 or 8" in fix, fix)
check("NVL72: or 16 trays per NVLink domain", "--hosts-per-nvlink-domain 16" in fix, fix)
check("NVL72: not the old 'or less with tp first' for a tp below the domain", "72 or less" not in fix, fix)

# MFU: both conventions, the one used named; model FLOPs redone by hand for GPT-3 175B.
B, s, L, h, V = 1536, 2048, 96, 12288, 50257
def flops(attn):
    return 3 * B * (L * (2 * s * 12 * h * h + attn * s * s * h) + 2 * s * h * V)
j = json.loads(run("plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--nodes", "64", "--global-batch-size",
                   str(B), "--top", "1", "--json", want=0).stdout)
c = j["candidates"][0]
check("plan JSON: model FLOPs in full and causal-halved, as by hand",
      abs(c["model_flops"] / flops(4) - 1) < 1e-9 and abs(c["model_flops_causal_halved"] / flops(2) - 1) < 1e-9,
      (c.get("model_flops"), flops(4), c.get("model_flops_causal_halved"), flops(2)))
check("plan JSON: both MFU figures, in the FLOPs' ratio",
      abs(c["mfu_causal_halved"] / c["mfu"] - flops(2) / flops(4)) < 1e-4 and 0 < c["mfu"] <= 1, c)
check("plan JSON: the convention is named", "full" in c.get("mfu_convention", ""), c.get("mfu_convention"))
t = run("plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--nodes", "64", "--global-batch-size", str(B),
        "--top", "1", want=0).stdout
m = re.search(r"MFU ([\d.]+)% \(attention counted in full; ([\d.]+)% with causal attention halved", t)
check("plan text: both figures and the convention", m and abs(float(m.group(1)) - 100 * c["mfu"]) < 0.06
      and abs(float(m.group(2)) - 100 * c["mfu_causal_halved"]) < 0.06, t[-800:])
sim = os.path.join(root, "examples", "gpt3-175b-4096-a100.toml")
j = json.loads(run("simulate", "--config", sim, "--json", want=0).stdout)
peak = j["world"] * 312e12
check("simulate JSON: MFU of the simulated step, both conventions",
      abs(j["mfu"] - j["model_flops"] / (j["step_s"] * peak)) < 1e-6
      and abs(j["mfu_causal_halved"] - j["model_flops_causal_halved"] / (j["step_s"] * peak)) < 1e-6, j.get("mfu"))
t = run("simulate", "--config", sim, want=0).stdout
check("simulate text: both figures", "with causal attention halved" in t, t[:1500])

# The default stack on a GPU cluster is the one named and the one predicted: the same plan as
# --stack megatron-core-te, another than the runtime's own stack.
small = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "64", "--top", "1"]
first = lambda args: json.loads(run("plan", *small, *args, "--json", want=0).stdout)["candidates"][0]
default, named, own = first([]), first(["--stack", "megatron-core-te"]), first(["--stack", "trident"])
check("default stack: the first line names megatron-core-te",
      run("plan", *small, want=0).stdout.startswith("Stack: megatron-core-te (the default on a GPU cluster"))
check("default stack: predicts what --stack megatron-core-te predicts",
      (default["layout"], default["tokens_per_s"]) == (named["layout"], named["tokens_per_s"])
      and default["layout"]["stack"] == "megatron-core-te", (default["layout"], named["layout"]))
check("default stack: not the runtime's own stack's prediction",
      (own["layout"]["stack"], own["tokens_per_s"]) != ("megatron-core-te", default["tokens_per_s"]), own["layout"])
fixed = small[:-2] + ["--tp", "2", "--pp", "2", "--dp", "4"]
sim = lambda args: json.loads(run("simulate", *fixed, *args, "--json", want=0).stdout)
check("default stack: simulate predicts the named stack too",
      sim([])["step_s"] == sim(["--stack", "megatron-core-te"])["step_s"] != sim(["--stack", "trident"])["step_s"])

# The overlap printed is the one predicted: megatron-core-te's pipeline sends block in 1F1B.
for schedule, want in (("1f1b", "tp,dp"), ("interleaved", "tp,dp,pp")):
    args = fixed + ["--schedule", schedule, "--virtual-stages", "2" if schedule == "interleaved" else "1"]
    planned = json.loads(run("plan", *args, "--json", want=0).stdout)["candidates"][0]
    lay = planned["layout"]
    text = run("plan", *args, want=0).stdout
    simulated = run("simulate", *args, want=0).stdout
    # (the rehearsal line "overlap X -> dp" names what a CPU rank replaces, not the prediction)
    said = re.findall(r"overlap (tp,dp(?:,pp)?)(?!,| ->)( \(pipeline sends block in 1f1b)?", text + simulated)
    check(f"{schedule}: JSON, plan and simulate print overlap {want}", lay["overlap"] == want and said
          and all(o == want and bool(why) == (schedule == "1f1b") for o, why in said), (lay["overlap"], said))
    # The config plan writes means the same prediction when read back.
    cfg = os.path.join(tmp, f"{schedule}.toml")
    run("plan", *args, "--emit", cfg, want=0)
    again = json.loads(run("plan", "--config", cfg, "--top", "1", "--json", want=0).stdout)["candidates"][0]
    check(f"{schedule}: the emitted config plans the same step with the same overlap",
          (again["time_s"]["step"], again["layout"]["overlap"]) == (planned["time_s"]["step"], want),
          (again["layout"], planned["time_s"]))

shutil.rmtree(tmp, ignore_errors=True)
finish()
