"""Time to train with failures through the commands as users run them (trident plan / simulate).

1. Llama 3 405B on 16,384 H100s (the paper's layout tp 8 pp 16 dp 128, 16M-token batches) with the
   defaults, which are the Llama 3 paper's failure rate and storage bandwidth: the effective
   training time is within 5 points of the paper's "above 90%". Nothing is fitted to it.
2. Llama 3 70B on 512 H100s, --train-tokens 15e12: goodput, interval and days with and without
   failures printed, each JSON figure recomputed by hand from the JSON's own inputs.
3. simulate prints the same block (text, JSON, HTML); --rank-by goodput orders by tokens/s x goodput;
   bad values exit 2 naming the value.
Usage: check_goodput.py TRIDENT
"""
import json
import math
import os
import subprocess
import sys
import tempfile

t = sys.argv[1]


def run(*args, code=0):
    p = subprocess.run([t, *args], capture_output=True, text=True)
    assert p.returncode == code, f"{args}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout + p.stderr


def hand_check(g, ideal_days):
    assert abs(g["mtbf_s"] - 1 / (g["failures_per_1000_gpu_days"] / 1000 / 86400 * g["gpus"])) < 1e-6 * g["mtbf_s"]
    c = g["checkpoint"]
    save = max(c["total_bytes"] / (g["storage_gbytes_per_s"] * 1e9), c["node_bytes"] / (g["storage_node_gbytes_per_s"] * 1e9))
    assert abs(g["save_s"] - save) < 1e-9 * save, (g["save_s"], save)
    young = math.sqrt(2 * save * g["mtbf_s"])
    assert abs(g["young_interval_s"] - young) < 1e-9 * young
    assert g["interval_steps"] == max(1, round(young / g["step_s"])), g
    tau = g["interval_steps"] * g["step_s"]
    lost = g["startup_s"] + g["load_s"] + (tau + save) / 2
    good = (1 - lost / g["mtbf_s"]) / (1 + save / tau)
    assert abs(g["goodput"] - good) < 1e-9, (g["goodput"], good)
    assert abs(g["days_without_failures"] - ideal_days) < 1e-9 * ideal_days
    assert abs(g["days"] - ideal_days / good) < 1e-6 * g["days"], (g["days"], ideal_days / good)
    lo, hi = g["days_90_interval"]
    assert lo <= g["days"] <= hi, g


# 1. Llama 3 405B, the paper's run.
l405 = ["--model", "llama3-405b", "--cluster", "dgx-h100", "--nodes", "2048", "--tp", "8", "--pp", "16", "--dp", "128",
        "--global-batch-size", "2048", "--train-tokens", "15e12"]
j = json.loads(run("plan", *l405, "--top", "1", "--json"))
g = j["goodput"]
hand_check(g, j["time_to_train"]["days"])
assert "419" in g["failure_source"] and "Tectonic" in g["storage_source"], g
assert abs(g["goodput"] - 0.90) <= 0.05, f"Llama 3 405B goodput {g['goodput']:.4f}, paper: above 90%"
print(f"Llama 3 405B on 16384 H100s: goodput {100 * g['goodput']:.2f}% (paper: above 90%), interval {g['interval_steps']} "
      f"steps = {g['interval_s']:.0f} s, save {g['save_s']:.2f} s, days {g['days_without_failures']:.1f} -> {g['days']:.1f} "
      f"({g['days_90_interval'][0]:.1f}-{g['days_90_interval'][1]:.1f})")

# 2. Llama 3 70B on 512 H100s: the text names every figure.
l70 = ["--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64", "--global-batch-size", "1024",
       "--train-tokens", "15e12", "--top", "1"]
text = run("plan", *l70)
for want in ("time to train with failures:", "goodput", "interval (Young/Daly): sqrt(2 x save",
             "days without failures or saves", "90% interval", "save = load = max(", "restart: start-up"):
    assert want in text, f"missing '{want}' in\n{text[-3000:]}"
j = json.loads(run("plan", *l70, "--json"))
hand_check(j["goodput"], j["time_to_train"]["days"])
g = j["goodput"]
assert g["days"] > g["days_without_failures"]
print(f"Llama 3 70B on 512 H100s: goodput {100 * g['goodput']:.2f}%, interval {g['interval_steps']} steps, days "
      f"{g['days_without_failures']:.1f} -> {g['days']:.1f} ({g['days_90_interval'][0]:.1f}-{g['days_90_interval'][1]:.1f})")

# A slower storage lowers goodput and lengthens the interval.
slow = json.loads(run("plan", *l70, "--json", "--storage-gbytes-per-s", "20"))["goodput"]
assert slow["save_s"] > g["save_s"] and slow["interval_s"] > g["interval_s"] and slow["goodput"] < g["goodput"], slow

# 3. simulate: text, JSON and HTML.
sim = ["simulate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--dp", "16",
       "--global-batch-size", "1024", "--train-tokens", "15e12", "--recompute", "selective", "--sequence-parallel", "--zero", "1"]
assert "time to train with failures:" in run(*sim)
js = json.loads(run(*sim, "--json"))
hand_check(js["goodput"], js["time_to_train"]["days"])
with tempfile.TemporaryDirectory() as d:
    page = os.path.join(d, "s.html")
    run(*sim, "--html", page)
    assert "time to train with failures:" in open(page).read()
    page = os.path.join(d, "p.html")
    run("plan", *l70, "--html", page)
    assert "time to train with failures:" in open(page).read()
# Without --train-tokens, a resilience key alone prints the goodput (the flag is honoured).
out = run("simulate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--tp", "8", "--pp", "4", "--dp", "16",
          "--global-batch-size", "1024", "--restart-startup-s", "300")
assert "goodput with failures:" in out and "start-up 300 s" in out, out[-2000:]

# --rank-by goodput: effective tokens/s in order, each = tokens/s x goodput.
out = run("plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "128",
          "--rank-by", "goodput", "--top", "3", "--storage-node-gbytes-per-s", "0.5")
rows = [l for l in out.splitlines() if l.startswith("  #") and "tokens/s x goodput" in l]
assert len(rows) == 3, out[-3000:]
eff = [float(r.rsplit("= ", 1)[1].split()[0]) for r in rows]
assert eff == sorted(eff, reverse=True), eff

# Bad input: exit 2 with the value and the fix.
bad = run("plan", *l70, "--rank-by", "speed", code=2)
assert "--rank-by 'speed'" in bad and "goodput" in bad, bad
bad = run("plan", *l70, "--storage-gbytes-per-s", "0", code=2)
assert "storage-gbytes-per-s" in bad, bad
# A rate so high the run never ends: said, not a crash.
out = run("plan", *l70, "--failures-per-1000-gpu-days", "5000")
assert "never finishes" in out, out[-2000:]
# No failures: nothing lost, no infinite MTBF printed.
out = run("plan", *l70, "--failures-per-1000-gpu-days", "0")
assert "failures: none" in out and "inf" not in out.split("time to train with failures")[1], out[-2000:]
print("ok")
