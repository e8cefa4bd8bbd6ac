"""Small things people expect of plan (issue 51 item 8): --train-tokens 15T / 300B / 1.5e13;
costs with their currency; link speeds in vendors' units (400Gb/s per GPU) as flags and in a
cluster file; --days N (the fewest GPUs that train the tokens in N days, checked against plans at
that node count and one node fewer); --compare of given layouts side by side (each the same as
planning that layout alone)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
JOB = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size", "1024"]


def run(*args):
    return subprocess.run([trident, *args], capture_output=True, text=True, timeout=300)


def plan_json(*args):
    p = run("plan", "--json", *args)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, {}


# --train-tokens with a suffix.
seen = {}
for text, tokens in [("15T", 1.5e13), ("1.5e13", 1.5e13), ("15000B", 1.5e13), ("300B", 3e11)]:
    p, j = plan_json(*JOB, "--top", "1", "--train-tokens", text)
    got = j.get("time_to_train", {}).get("train_tokens")
    seen[text] = j.get("time_to_train", {}).get("steps")
    check(f"--train-tokens {text} is {tokens:g} tokens", p.returncode == 0 and got == tokens,
          f"exit {p.returncode}: {got} {p.stderr[-300:]}")
check("15T, 1.5e13 and 15000B take the same steps", seen["15T"] == seen["1.5e13"] == seen["15000B"], seen)
p = run("plan", *JOB, "--train-tokens", "15X")
check("--train-tokens 15X is refused by name", p.returncode == 2 and "--train-tokens '15X'" in p.stderr, p.stderr[-300:])

# Costs with their currency.
for price, cur in [("2.5 USD", "USD"), ("$2.5", "USD"), ("2.1EUR", "EUR")]:
    p, j = plan_json(*JOB, "--top", "1", "--train-tokens", "15T", "--gpu-hour-cost", price)
    t = j.get("time_to_train", {})
    check(f"--gpu-hour-cost '{price}': JSON cost in {cur}", p.returncode == 0 and t.get("currency") == cur
          and abs(t.get("cost", 0) - t.get("gpu_hours", 0) * float(price.strip("$USDER "))) < 1e-6 * t.get("cost", 1), t)
    text = run("plan", *JOB, "--top", "1", "--train-tokens", "15T", "--gpu-hour-cost", price).stdout
    line = [l for l in text.splitlines() if l.startswith("time to train")]
    check(f"--gpu-hour-cost '{price}': the text's cost says {cur}", line and f" {cur}" in line[0].split("cost")[-1], line)
text = run("plan", *JOB, "--top", "1", "--train-tokens", "15T", "--gpu-hour-cost", "2.5").stdout
line = [l for l in text.splitlines() if l.startswith("time to train")]
check("a price without currency says so", line and "no currency given" in line[0], line)
p = run("plan", *JOB, "--train-tokens", "15T", "--gpu-hour-cost", "two dollars")
check("a price that is not one is refused by name", p.returncode == 2 and "--gpu-hour-cost 'two dollars'" in p.stderr,
      p.stderr[-300:])

# Link speeds as vendors quote them: 400Gb/s per GPU = 50 GB/s per GPU = 400 GB/s per 8-GPU node.
_, base = plan_json(*JOB, "--top", "1", "--inter-node-gbytes-per-s", "400")
_, unit = plan_json(*JOB, "--top", "1", "--inter-node-gbytes-per-s", "400Gb/s")
_, slow = plan_json(*JOB, "--top", "1", "--inter-node-gbytes-per-s", "100Gb/s")
step = lambda j: (j.get("candidates") or [{}])[0].get("time_s", {}).get("step")  # noqa: E731
check("--inter-node-gbytes-per-s 400Gb/s (per GPU) equals 400 GB/s per 8-GPU node", step(base) and step(base) == step(unit),
      (step(base), step(unit)))
check("and 100Gb/s per GPU is slower", step(slow) and step(slow) > step(unit), (step(slow), step(unit)))
text = run("plan", *JOB, "--top", "1", "--inter-node-gbytes-per-s", "100Gb/s").stdout
check("the cluster line shows 100 GB/s per node = 12.5 GB/s per GPU", "100.0 GB/s per node = 12.5 GB/s per GPU" in text,
      text[:800])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "cluster.toml")
    with open(path, "w") as f:
        f.write('[cluster]\ninter-node-gbytes-per-s = "400Gb/s"\nintra-gbytes-per-s = "3600Gb/s"\n')
    p, filej = plan_json("--config", path, *JOB, "--top", "1")
    check("a cluster file takes 400Gb/s and 3600Gb/s (= 450 GB/s NVLink per GPU): the preset's step",
          p.returncode == 0 and step(filej) == step(base), f"exit {p.returncode}: {step(filej)} {p.stderr[-300:]}")
p = run("plan", *JOB, "--inter-node-gbytes-per-s", "-4Gb/s")
check("a negative link speed with a unit is refused", p.returncode == 2 and "-4Gb/s" in p.stderr, p.stderr[-300:])

# --days N: the fewest GPUs that train 15T tokens of Llama 3 70B in 30 days.
p, j = plan_json(*JOB, "--train-tokens", "15T", "--days", "30")
f = j.get("fewest_gpus", {})
n = f.get("nodes")
check("--days 30 answers a node count", p.returncode == 0 and isinstance(n, int) and n > 0, f"exit {p.returncode}: {f} {p.stderr[-300:]}")
if isinstance(n, int):
    job = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--global-batch-size", "1024", "--train-tokens", "15T"]
    _, at = plan_json(*job, "--nodes", str(n), "--top", "1")
    _, below = plan_json(*job, "--nodes", str(n - 1), "--top", "1") if n > 1 else (None, {})
    days_at = at.get("time_to_train", {}).get("days")
    days_below = below.get("time_to_train", {}).get("days")
    check(f"planned at {n} nodes it takes 30 days or less", days_at is not None and days_at <= 30, days_at)
    check(f"and at {n - 1} nodes more than 30 (or nothing fits)", days_below is None or days_below > 30, days_below)
    check("the answer's days are those of the plan at that count", abs(f["time_to_train"]["days"] - days_at) < 1e-9,
          (f["time_to_train"]["days"], days_at))
p = run("plan", *JOB, "--days", "30")
check("--days without --train-tokens is refused", p.returncode == 2 and "--train-tokens" in p.stderr, p.stderr[-300:])

# --compare: given layouts side by side, each what planning it alone gives.
p, j = plan_json(*JOB, "--compare", "tp8-pp4,tp4-pp8,tp8-pp8-dp8")
cs = j.get("compare", [])
check("--compare of three layouts gives three columns", p.returncode == 0 and len(cs) == 3, f"exit {p.returncode}: {p.stderr[-300:]}")
for c, fixed in zip(cs, [["--tp", "8", "--pp", "4"], ["--tp", "4", "--pp", "8"], ["--tp", "8", "--pp", "8", "--dp", "8"]]):
    _, alone = plan_json(*JOB, *fixed, "--top", "1")
    want = (alone.get("candidates") or [{}])[0].get("tokens_per_s")
    check(f"{c.get('asked')}: as planned alone ({want} tokens/s)",
          want and abs(c.get("tokens_per_s", 0) - want) <= 1e-6 * want, c)
text = run("plan", *JOB, "--compare", "tp8-pp4,tp4-pp8").stdout
check("the text puts them side by side with the step's terms", "Compared layouts (2)" in text and "= compute" in text
      and "tp 8 pp 4" in text and "tp 4 pp 8" in text, text[:1500])
p = run("plan", *JOB, "--compare", "tp8-pq4,tp4")
check("a layout that is not one is refused by name", p.returncode == 2 and "'pq4'" in p.stderr, p.stderr[-300:])
p = run("plan", *JOB, "--compare", "tp8")
check("one layout is not a comparison", p.returncode == 2 and "two or more" in p.stderr, p.stderr[-300:])

finish()
