"""Charts that can be read: every legend of the HTML pages, as headless Chromium draws it, gives
each term its own colour from the colour-blind-safe palette (Paul Tol's "muted" scheme and two
greys, report/palette.h), and a term keeps its colour from chart to chart and page to page.

The pages: a plan (the step's time breakdown, the memory per stage, the pipeline timeline's
keys), and two rehearsals with their predictions (mpirun -np 2 trident train): expert parallel
(compute, TP, EP all-to-all, EP wait, PP, bubble, DP, other) and context parallel (CP ring
exchange). The browser lays each page out; a script added to a copy of it writes where each
legend swatch is, and the swatch's colour is then read from the pixels of the browser's
screenshot (not from the page's source): two terms must not share a colour there."""
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
# Paul Tol's "muted" qualitative scheme (https://personal.sron.nl/~pault/), pale and mid grey.
PALETTE = {"#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499",
           "#DDDDDD", "#777777"}
# The terms a legend's label names (the plan's part names, the rehearsal's row labels).
TERM = {"compute": "compute", "compute (+optimizer)": "compute", "tp": "tp", "TP collectives": "tp", "pp": "pp",
        "PP transfers": "pp", "dp": "dp", "DP exposed": "dp", "CP ring exchange": "cp", "EP all-to-all": "ep",
        "EP wait (peers)": "ep_wait", "bubble": "bubble", "bubble idle": "bubble", "optimizer": "optimizer",
        "other": "other", "other (host work)": "other"}


def run(args, env=None, want=0):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=240)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    raise SystemExit("FAIL: chromium is not installed (scripts/install-deps.sh installs it)")
WIDTH, HEIGHT = 1400, 5000
browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--force-device-scale-factor=1", f"--window-size={WIDTH},{HEIGHT}", f"--user-data-dir={tmp}/profile",
           "--virtual-time-budget=2000"]

# Added to a copy of the page: each legend swatch's label and centre (page pixels), as JSON in a
# <pre id="swatches">. The HTML legends are <span><i></i>label</span>; the timeline's keys are SVG
# rects (class "key") followed by their <text>.
LOCATE = """<script>
(() => {
  const out = [];
  for (const legend of document.querySelectorAll('.legend')) {
    const chart = legend.previousElementSibling ? legend.previousElementSibling.id || 'chart' : 'chart';
    for (const span of legend.querySelectorAll('span')) {
      const r = span.querySelector('i').getBoundingClientRect();
      out.push({chart, label: span.textContent.trim(), x: r.left + r.width / 2 + scrollX, y: r.top + r.height / 2 + scrollY});
    }
  }
  const svg = document.querySelector('#timeline svg');
  if (svg) for (const key of svg.querySelectorAll('rect.key')) {
    const r = key.getBoundingClientRect(), text = key.nextElementSibling;
    out.push({chart: 'timeline', label: text ? text.textContent.trim() : '?', x: r.left + r.width / 2 + scrollX,
              y: r.top + r.height / 2 + scrollY});
  }
  const pre = document.createElement('pre');
  pre.id = 'swatches';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def swatches(page):
    """[(chart, label, '#RRGGBB' read from the screenshot)] of every legend swatch of the page."""
    html = open(page).read()
    located = page + ".located.html"
    open(located, "w").write(html.replace("</body>", LOCATE + "</body>"))
    d = run(browser + ["--dump-dom", "file://" + located]).stdout
    m = re.search(r'<pre id="swatches">(.*?)</pre>', d, re.S)
    if not m:
        raise SystemExit(f"FAIL {page}: the locating script wrote nothing")
    found = json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&quot;", '"'))
    png = page + ".png"
    run(browser + [f"--screenshot={png}", "file://" + page])
    out = []
    for s in found:
        x, y = int(s["x"]), int(s["y"])
        if not (0 <= x < WIDTH and 0 <= y < HEIGHT):
            raise SystemExit(f"FAIL {page}: swatch {s['label']} at {x},{y} is outside the screenshot")
        pixel = run(["convert", png, "-format", f"%[hex:p{{{x},{y}}}]", "info:"]).stdout.strip()
        out.append((s["chart"], s["label"], "#" + pixel[:6].upper()))
    return out


def near_palette(colour):
    """The palette colour within 3 per channel of a pixel (antialiasing, colour management), or None."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    for p in PALETTE:
        if all(abs(a - int(p[i:i + 2], 16)) <= 3 for a, i in zip(rgb, (1, 3, 5))):
            return p
    return None


cluster = os.path.join(tmp, "cluster.toml")
open(cluster, "w").write("[cluster]\ngpu_memory_gib = 16\ngpu_bf16_tflops = 0.1\ngpu_fp32_tflops = 0.05\n"
                         "gpu_hbm_gbytes_per_s = 10\ngpus_per_node = 2\nnodes = 1\nintra_link = \"pcie\"\n"
                         "intra_gbytes_per_s = 5\nintra_latency_us = 5\ninter_link = \"ethernet\"\n"
                         "inter_node_gbytes_per_s = 1\ninter_latency_us = 50\n")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
small = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--global-batch-size", "4",
         "--micro-batch-size", "1", "--steps", "3", "--threads", "1", "--comm-timeout", "120",
         "--prediction-cluster", cluster]
pages = {}
pages["plan"] = os.path.join(tmp, "plan.html")
run([trident, "plan", "--config", os.path.join(root, "examples", "plan-gpt3-175b-512-dgx-a100.toml"), "--html",
     pages["plan"]])
for name, layout in (("EP", ["--dp", "2", "--ep", "2", "--family", "llama", "--experts", "8", "--experts-per-token", "2",
                             "--expert-ffn-hidden", "32", "--no-moe-drop"]),
                     ("CP", ["--cp", "2"])):
    pages[name] = os.path.join(tmp, name + ".html")
    run(["mpirun", "--oversubscribe", "-np", "2", trident, "train", *layout, *small, "--html", pages[name]], env=env)

colour_of_term = {}  # term -> {colour: [where]}
for name, page in pages.items():
    found = swatches(page)
    charts = {}
    for chart, label, colour in found:
        charts.setdefault(chart, []).append((label, colour))
    check(f"{name}: the page has legends", charts, found)
    for chart, keys in charts.items():
        where = f"{name} {chart}"
        off = [(label, c) for label, c in keys if not near_palette(c)]
        check(f"{where}: every swatch is a palette colour", not off, off)
        by_colour = {}
        for label, c in keys:
            by_colour.setdefault(near_palette(c) or c, []).append(label)
        shared = {c: labels for c, labels in by_colour.items() if len(labels) > 1}
        check(f"{where}: {len(keys)} swatches, {len(keys)} colours", not shared, shared)
        for label, c in keys:
            if chart != "memory-bars" and label in TERM:
                colour_of_term.setdefault(TERM[label], {}).setdefault(near_palette(c) or c, []).append(where)

seen = {t for t in colour_of_term}
want = {"compute", "tp", "pp", "dp", "cp", "ep", "ep_wait", "bubble", "other"}
check("the legends name compute, TP, PP, DP, CP, EP, EP wait, bubble and other", want <= seen, want - seen)
split = {t: cs for t, cs in colour_of_term.items() if len(cs) > 1}
check("each term has one colour on every page and chart", not split, split)
terms_by_colour = {}
for t, cs in colour_of_term.items():
    for c in cs:
        terms_by_colour.setdefault(c, []).append(t)
clash = {c: ts for c, ts in terms_by_colour.items() if len(ts) > 1}
check("no two step terms share a colour anywhere", not clash, clash)

shutil.rmtree(tmp, ignore_errors=True)
finish()
