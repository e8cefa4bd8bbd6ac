"""--html on plan, lint, simulate and a rehearsal (mpirun -np 2 trident train) writes one
self-contained page: no network reference, the key sections present in the DOM headless Chromium
builds, and a screenshot that is not blank. Also: the SVG timeline keeps five-digit rank labels
whole and zooms on interleaved schedules."""
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


def run(args, env=None, want=0):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    raise SystemExit("FAIL: chromium is not installed (scripts/install-deps.sh installs it)")
browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={tmp}/profile", "--virtual-time-budget=2000"]


def dom(path):
    return run(browser + ["--dump-dom", "file://" + path]).stdout


def screenshot_colours(path, png):
    run(browser + ["--window-size=1400,2400", f"--screenshot={png}", "file://" + path])
    out = run(["identify", "-format", "%k", png]).stdout.strip()
    return int(out)


def self_contained(html):
    # The only URL allowed is the SVG namespace name, which is never fetched.
    urls = [u for u in re.findall(r"(?:https?|ftp)://[^\s\"'<>)]+", html) if u != "http://www.w3.org/2000/svg"]
    refs = re.findall(r"<(?:script|link|img|iframe)\b[^>]*(?:src|href)=", html, re.I)
    return urls + refs


examples = os.path.join(root, "examples")
pages = {
    "plan": (["plan", "--config", f"{examples}/plan-gpt3-175b-512-dgx-a100.toml"],
             ["candidates", "findings", "memory", "time-breakdown", "topology", "timeline", "timeline-zoom"]),
    "lint": (["lint", "--config", f"{examples}/lint-pitfalls.toml"], ["findings", "memory", "topology", "timeline"]),
    "simulate": (["simulate", "--config", f"{examples}/gpt3-175b-4096-a100.toml"],
                 ["memory", "time-breakdown", "topology", "timeline"]),
}
for name, (args, ids) in pages.items():
    path = os.path.join(tmp, name + ".html")
    run([trident, *args, "--html", path], want=1 if name == "lint" else 0)
    html = open(path).read()
    check(f"{name}: self-contained (no URL, no external resource)", not self_contained(html), self_contained(html))
    d = dom(path)
    missing = [i for i in ids if f'id="{i}"' not in d]
    check(f"{name}: the browser's DOM has {', '.join(ids)}", not missing, missing)
    colours = screenshot_colours(path, os.path.join(tmp, name + ".png"))
    check(f"{name}: screenshot is not blank ({colours} colours)", colours > 64, colours)

# What the sections hold: one memory bar per stage, the capacity line, lint's error findings.
plan_html = open(os.path.join(tmp, "plan.html")).read()
stages = len(re.findall(r"<text [^>]*text-anchor=\"end\">stage \d+ \(\d+ layers\)</text>", plan_html))
check("plan: one memory bar per pipeline stage", stages >= 2, stages)
check("plan: the capacity line is drawn", 'class="limit"' in plan_html)
lint_html = open(os.path.join(tmp, "lint.html")).read()
check("lint: the tp-crosses-nodes error in the table", re.search(r"<td>error</td><td>tp-crosses-nodes</td>", lint_html),
      re.findall(r"<td>(?:error|warning)</td><td>[^<]*</td>", lint_html))

# Rehearsal: rank 0 writes the page, measured beside predicted shares.
cluster = os.path.join(tmp, "cluster.toml")
open(cluster, "w").write("[cluster]\ngpu_memory_gib = 16\ngpu_bf16_tflops = 0.1\ngpu_fp32_tflops = 0.05\n"
                         "gpu_hbm_gbytes_per_s = 10\ngpus_per_node = 2\nnodes = 1\nintra_link = \"pcie\"\n"
                         "intra_gbytes_per_s = 5\nintra_latency_us = 5\ninter_link = \"ethernet\"\n"
                         "inter_node_gbytes_per_s = 1\ninter_latency_us = 50\n")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
reh = os.path.join(tmp, "rehearsal.html")
run(["mpirun", "--oversubscribe", "-np", "2", trident, "train", "--pp", "2", "--layers", "2", "--hidden", "32",
     "--heads", "2", "--seq-len", "16", "--global-batch-size", "4", "--micro-batch-size", "1", "--steps", "4",
     "--threads", "1", "--comm-timeout", "120", "--prediction-cluster", cluster, "--html", reh], env=env)
d = dom(reh)
check("rehearsal: measured and predicted shares in the DOM",
      'id="rehearsal"' in d and re.search(r"<td>bubble idle</td><td>[\d.]+%</td><td>[\d.]+%</td>", d), d[-1500:])
check("rehearsal: self-contained", not self_contained(open(reh).read()))
colours = screenshot_colours(reh, os.path.join(tmp, "rehearsal.png"))
check(f"rehearsal: screenshot is not blank ({colours} colours)", colours > 16, colours)
# One process runs the same trainer: its one-rank rehearsal page is written too.
one = os.path.join(tmp, "one.html")
run([trident, "train", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--steps", "2",
     "--threads", "1", "--html", one])
check("one process: the page is written", 'id="rehearsal"' in open(one).read())

# SVG: five-digit ranks keep whole labels (the label column grows with them).
svg = os.path.join(tmp, "big.svg")
run([trident, "simulate", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--nodes", "2048", "--tp", "8",
     "--pp", "16", "--order", "tp-dp-pp", "--global-batch-size", "4096", "--svg", svg])
text = open(svg).read()
label = re.search(r'<text x="(\d+)"[^>]*text-anchor="end">(stage 15  ranks 15\d{3}-15\d{3})</text>', text)
check("svg: five-digit rank label present", label is not None, re.findall(r"stage 15[^<]*", text)[:2])
if label:
    # 12 px DejaVu Sans is at most ~7.3 px per character: the label must fit left of its anchor.
    check("svg: five-digit rank label fits its column", int(label.group(1)) >= 7.3 * len(label.group(2)), label.groups())

shutil.rmtree(tmp, ignore_errors=True)
finish()
