"""plan lists the layout NVIDIA published for the model, GPU and GPU count beside its own best:
every latest-release row of data/published_runs/ (models Trident describes) is found by plan and
planned in its sizes; the ratio and the term differences it prints are the two columns' own
numbers; another GPU count lists none. Also DeepSeek-V3 on 1024 H100 (NVIDIA's TP2 PP8 EP64)."""
import csv
import io
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]
hf = os.path.join(root, "data", "models", "hf")
MODEL = {"deepseek-v3-671b": ["--hf-config", os.path.join(hf, "deepseek-v3.json")],
         "gpt-oss-120b": ["--hf-config", os.path.join(hf, "gpt-oss-120b.json")],
         "qwen3-30b-a3b": ["--hf-config", os.path.join(hf, "qwen3-30b-a3b.json")],
         "qwen3-235b-a22b": ["--hf-config", os.path.join(hf, "qwen3-235b-a22b.json")],
         "llama3.1-405b": ["--hf-config", os.path.join(hf, "llama3.1-405b.json")],
         "llama3-8b": ["--model", "llama3-8b"], "llama3-70b": ["--model", "llama3-70b"]}
SYSTEM = {"DGX-B200": ("dgx-b200", 8), "DGX-GB200": ("gb200-nvl72", 4)}


def plan(args):
    p = subprocess.run([trident, "plan", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def release(r):
    return tuple(int(x) for x in r["release"].split("."))


text = "".join(l for l in open(os.path.join(root, "data", "published_runs", "megatron-bridge-blackwell.csv"))
               if not l.startswith("#"))
rows = [r for r in csv.DictReader(io.StringIO(text)) if r["model_key"] in MODEL and "Pre-Training" in r["source"]]
latest = {}
for r in rows:
    k = (r["model_key"], r["system"], r["num_gpus"])
    latest.setdefault(k, []).append(r)
size = lambda v: int(v) if v not in ("", "n/a") else 1  # noqa: E731
for k, rs in sorted(latest.items()):
    newest = max(release(r) for r in rs)
    layouts = {(size(r["tp"]), size(r["pp"]), size(r["vp"]), size(r["cp"]), size(r["ep"])) for r in rs
               if release(r) == newest}
    r = rs[0]
    cluster, per_node = SYSTEM[r["system"]]
    args = [*MODEL[r["model_key"]], "--cluster", cluster, "--nodes", str(int(r["num_gpus"]) // per_node),
            "--global-batch-size", r["gbs"], "--seq-len", r["seq_len"], "--top", "1"]
    code, out, err = plan(args + ["--json"])
    if code != 0:
        check(f"{k}: plan answers", False, err[-400:])
        continue
    j = json.loads(out)
    pub = j.get("published_layouts", [])
    got = {(p["tp"], p["pp"], p["vp"], p["cp"], p["ep"]) for p in pub}
    check(f"{k}: plan lists the latest release's published layout", len(pub) == 1 and got <= layouts, (got, layouts))
    for p in pub:
        if not p["planned"]["fits"]:
            check(f"{k}: the published layout fits (NVIDIA ran it)", False, p["planned"])
            continue
        best = j["candidates"][0]
        check(f"{k}: ratio = the two throughputs (JSON rounds tokens/s)",
              abs(p["best_over_published"] / (best["tokens_per_s"] / p["planned"]["tokens_per_s"]) - 1) < 1e-5, p)
        lay = p["planned"]["layout"]
        check(f"{k}: planned in its sizes", f"tp {p['tp']} " in lay and f"pp {p['pp']}" in lay, lay)
    other = str(int(r["num_gpus"]) // per_node * 3)  # 3x: no published row at that count
    doubled = list(args)
    doubled[doubled.index("--nodes") + 1] = other
    code, out, err = plan(doubled + ["--json"])
    # exit 1 is "nothing fits" (still JSON); 2 would be a bad command line, which this check must not pass on.
    check(f"{k}: none listed at another GPU count", code in (0, 1) and "published_layouts" not in json.loads(out),
          (code, err[-300:]))

# DeepSeek-V3 on 1024 H100: the text names it, plans it, and explains the difference in numbers.
code, out, err = plan([*MODEL["deepseek-v3-671b"], "--cluster", "dgx-h100", "--nodes", "128",
                       "--global-batch-size", "8192", "--seq-len", "4096", "--top", "1"])
check("DeepSeek-V3 1024 H100: listed", code == 0 and "Published layout: DeepSeek-V3 on 1024 H100" in out, out[-2000:])
block = out[out.find("Published layout:"):]
check("... planned in tp 2 pp 8 ep 64", "tp 2 pp 8 dp 64 ep 64" in block, block[:1500])
check("... and the best's gain by term", "by term (published -> #1)" in block
      or "as fast as the search's #1" in block, block[-800:])
# The text's sentence is the columns' numbers: ratio and the largest term difference.
import re  # noqa: E402
steps = re.search(r"step s\s+([0-9.]+)\s+([0-9.]+)", block)
ratio = re.search(r"#1 is ([0-9.]+)x the published", block)
if steps and ratio:
    check("... the ratio is the two steps' (same global batch)",
          abs(float(ratio.group(1)) - float(steps.group(2)) / float(steps.group(1))) < 0.006, (ratio.group(0), steps.group(0)))
# Llama 3.1 405B on 128 B200: the published tp 4 pp 8 cp 2 v 8 splits 126 layers unevenly; plan says
# it is faster than its own best, and why, rather than calling it slower.
code, out, err = plan([*MODEL["llama3.1-405b"], "--cluster", "dgx-b200", "--nodes", "16", "--global-batch-size", "64",
                       "--seq-len", "8192", "--top", "1"])
block = out[out.find("Published layout:"):]
faster = re.search(r"published layout is predicted ([0-9.]+)x faster", block)
if faster:
    check("405B B200: the uneven split named as the reason", "embedding and the loss as pipeline units" in block, block[-600:])
else:
    check("405B B200: the search's best is at least as fast", "#1 is" in block or "as fast as" in block, block[-600:])
finish()
