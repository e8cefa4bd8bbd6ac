"""--html on plan, lint, simulate and a rehearsal (mpirun -np 2 trident train) writes one
self-contained page: no network reference, the key sections present in the DOM headless Chromium
builds, and a screenshot that is not blank. Also: the SVG timeline keeps five-digit rank labels
whole and zooms on interleaved schedules, and the HTML page's timeline window zooms and moves in
the browser."""
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

# The plan page's timeline window: the browser runs its script, which sets the window's viewBox
# from the sliders (here through the page's #zoom-window-zoom=K&zoom-window-pan=P fragment, which
# sets the sliders and fires their input event, as a reader's move does), shows the block labels
# that fit, and says which milliseconds it shows. Another zoom shows other blocks and another picture.
def window_of(d):
    m = re.search(r'<svg id="zoom-window" [^>]*viewBox="([-\d.e]+) 0 ([\d.e]+) [\d.]+"[^>]*data-left="(\d+)" '
                  r'data-width="([\d.]+)"', d)
    if not m:
        return None
    x, w, left, width = (float(g) for g in m.groups())
    inner = d[d.index('<svg id="zoom-window"'):]
    labels = re.findall(r'<text x="([\d.]+)" [^>]*data-w="([\d.]+)" data-need="([\d.]+)"([^>]*)>', inner)
    shown = [(float(lx), float(bw), float(need)) for lx, bw, need, rest in labels
             if "display: none" not in rest and "display:none" not in rest and x <= float(lx) <= x + w]
    span = re.search(r'<span id="zoom-window-range">showing ([\d.]+) - ([\d.]+) ms of ([\d.]+) ms', d)
    return dict(x=x, w=w, left=left, width=width, shown=shown, span=span.groups() if span else None)


plan_page = os.path.join(tmp, "plan.html")
opened = window_of(dom(plan_page))
check("plan: the timeline window is set by the page's script (viewBox, the span shown)",
      opened and opened["span"] and opened["w"] < opened["width"], opened and {k: opened[k] for k in ("x", "w", "span")})
zoomed_page = "file://" + plan_page + "#zoom-window-zoom=40&zoom-window-pan=500"
zoomed = window_of(run(browser + ["--dump-dom", zoomed_page]).stdout)
if opened and zoomed:
    want_w = zoomed["width"] / 40
    check("zoom 40 at the middle: the viewBox is a 40th of the step, centred",
          abs(zoomed["w"] - want_w) < 0.01 and abs(zoomed["x"] - (zoomed["left"] + 0.5 * (zoomed["width"] - want_w))) < 0.01,
          (zoomed["x"], zoomed["w"], want_w))
    step_ms = float(zoomed["span"][2])
    a, b = (float(v) for v in zoomed["span"][:2])
    check("zoom 40 at the middle: it says it shows the middle 40th of the step",
          abs(b - a - step_ms / 40) < 2e-3 and abs((a + b) / 2 - step_ms / 2) < 2e-3, zoomed["span"])
    check("zoom 40: other block labels are shown than at the opening zoom",
          zoomed["shown"] and {l[0] for l in zoomed["shown"]} != {l[0] for l in opened["shown"]},
          (len(zoomed["shown"]), len(opened["shown"])))
    check("zoom 40: each label shown has a block wide enough for it at that zoom",
          all(bw * 40 >= need for _, bw, need in zoomed["shown"]), zoomed["shown"][:5])
    shots = []
    for url in ("file://" + plan_page, zoomed_page):
        png = os.path.join(tmp, f"window{len(shots)}.png")
        run(browser + ["--window-size=1400,8000", f"--screenshot={png}", url])  # tall: the window is low on the page
        shots.append(open(png, "rb").read())
    check("zoom 40: the page looks different", shots[0] != shots[1])

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
