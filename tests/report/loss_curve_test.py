"""The train page's loss curve (trident train --html): an SVG with the training loss of every step
and the validation loss of every evaluation, each point where the metrics file's values put it.

The SVG carries its axes' span and the plot's box (data-x-min ... data-plot); each point of the
lines is turned back into (step, loss) with them and compared with the metrics file's line of that
step. A run stopped at step 6 and resumed to 12 draws steps 7 to 12 on its page. Headless
Chromium lays the page out with the curve in it."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
tmp = tempfile.mkdtemp()
MODEL = ["--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--vocab", "256", "--threads", "1",
         "--micro-batch-size", "2", "--global-batch-size", "2"]


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def curve(page):
    """{term: [(step, loss)]} read back from the page's loss SVG, or None when it has none."""
    html = open(page).read()
    m = re.search(r'<div id="loss-curve">.*?</div>\n</div>', html, re.S) or re.search(r'<div id="loss-curve">.*', html, re.S)
    if not m:
        return None
    svg = m.group(0)
    a = re.search(r'data-x-min="([^"]+)" data-x-max="([^"]+)" data-y-min="([^"]+)" data-y-max="([^"]+)" '
                  r'data-plot="(\d+) (\d+) (\d+) (\d+)"', svg)
    x0, x1, y0, y1 = (float(v) for v in a.groups()[:4])
    left, top, w, h = (int(v) for v in a.groups()[4:])
    back = lambda px, py: (x0 + (px - left) / w * (x1 - x0), y1 - (py - top) / h * (y1 - y0))  # noqa: E731
    out = {}
    for term, pts in re.findall(r'<polyline class="series" data-term="([^"]+)" points="([^"]*)"', svg):
        out[term] = [back(*map(float, p.split(","))) for p in pts.split()]
    out["markers"] = [back(float(cx), float(cy)) for cx, cy in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    out["span"] = y1 - y0
    return out


def metrics(path):
    lines = [json.loads(line) for line in open(path) if line.strip()]
    return ({l["step"]: l["loss"] for l in lines}, {l["step"]: l["val_loss"] for l in lines if "val_loss" in l})


def same(points, want, span, what):
    """Each point at its step's value: step within 0.01, loss within 0.01 px of the 260 px plot."""
    tol = span / 260 * 0.01 + 1e-9
    steps = [round(s) for s, _ in points]
    check(f"{what}: a point per step {sorted(want)}", steps == sorted(want), steps)
    bad = [(s, l, want.get(round(s))) for s, l in points
           if abs(s - round(s)) > 0.01 or round(s) not in want or abs(l - want[round(s)]) > tol]
    check(f"{what}: each point at its step's loss (the metrics file's)", not bad, bad[:5])


page, log = os.path.join(tmp, "train.html"), os.path.join(tmp, "m.jsonl")
ck = os.path.join(tmp, "ck")
run([trident, "train", *MODEL, "--steps", "12", "--stop-at", "6", "--eval-every", "3", "--metrics", log,
     "--checkpoint", ck, "--html", page])
c = curve(page)
check("the train page has a loss curve", c is not None)
if c:
    loss, val = metrics(log)
    same(c.get("loss", []), loss, c["span"], "training loss")
    same(c["markers"], val, c["span"], "validation loss markers")
    same(c.get("val_loss", []), val, c["span"], "validation loss line")

# Resumed to the end: the page of the second run draws its own steps, 7 to 12.
page2, log2 = os.path.join(tmp, "resumed.html"), os.path.join(tmp, "m2.jsonl")
run([trident, "train", "--resume", ck, "--metrics", log2, "--html", page2])
c2 = curve(page2)
check("the resumed run's page has a loss curve", c2 is not None)
if c2:
    loss2, val2 = metrics(log2)
    check("the resumed run logged steps 7 to 12", sorted(loss2) == list(range(7, 13)), sorted(loss2))
    same(c2.get("loss", []), loss2, c2["span"], "resumed: training loss")
    same(c2["markers"], val2, c2["span"], "resumed: validation loss markers")

chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    raise SystemExit("FAIL: chromium is not installed (scripts/install-deps.sh installs it)")
d = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp}/profile",
         "--dump-dom", "file://" + page]).stdout
check("the browser's DOM has the curve's lines", re.search(r'id="loss-svg".*<polyline class="series"', d, re.S))

shutil.rmtree(tmp, ignore_errors=True)
finish()
