"""The interleaved timeline SVG shows what each GPU does: one row per stage (GPU) holding the
blocks of all its chunks (a row per chunk read as a GPU idle while it ran another chunk), each
block naming its chunk (label "c<chunk>/<micro-batch>", or "c<chunk>" where narrow) and shaded
by it; the file holds a window on the start of the step where the blocks are wide enough to
read, and the chunks' colours differ from each other and from the legend's other colours."""
import colorsys
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


def rgb(fill):
    m = re.fullmatch(r"hsl\((-?\d+),(\d+)%,(\d+)%\)", fill)
    if m:
        h, s, l = (int(x) for x in m.groups())
        return tuple(255 * c for c in colorsys.hls_to_rgb((h % 360) / 360, l / 100, s / 100))
    return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))


def distance(a, b):
    return sum((x - y) ** 2 for x, y in zip(rgb(a), rgb(b))) ** 0.5


pp, v = 4, 3
svg = os.path.join(tmp, "t.svg")
p = subprocess.run([trident, "simulate", "--model", "gpt3-1.3b", "--nodes", "1", "--tp", "1", "--pp", str(pp), "--dp", "2",
                    "--global-batch-size", "64", "--micro-batch-size", "1", "--schedule", "interleaved",
                    "--virtual-stages", str(v), "--svg", svg], capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    raise SystemExit(f"FAIL simulate: exit {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
text = open(svg).read()
whole = text[:text.find('<svg id="zoom"')] if '<svg id="zoom"' in text else text

rows = re.findall(r'<text x="\d+" y="(\d+)" font-size="12" text-anchor="end">(stage \d+[^<]*)</text>', whole)
check(f"one row per stage ({pp}), no row per chunk", len(rows) == pp and ">chunk " not in whole, rows)

# Every forward and backward block of a stage, whatever its chunk, on that stage's one row.
blocks = re.findall(r'<rect x="[\d.]+" y="(\d+)" width="[\d.]+" height="(\d+)" fill="([^"]+)"[^>]*>'
                    r'<title>([FB]) (\d+) chunk (\d+)', whole)
on_row = {}
for y, h, fill, kind, mb, chunk in blocks:
    on_row.setdefault(int(y), set()).add(int(chunk))
check(f"the compute blocks lie on {pp} rows, one per stage", len(on_row) == pp, sorted(on_row))
check("each row holds the blocks of every chunk", all(cs == set(range(v)) for cs in on_row.values()), on_row)
heights = {int(h) for _, h, *_ in blocks}
check("a block fills its row's height (no sub-row)", len(heights) == 1, heights)
shade = {}
for _, _, fill, kind, _, chunk in blocks:
    shade.setdefault((kind, int(chunk)), set()).add(fill)
check("one shade per kind and chunk", all(len(f) == 1 for f in shade.values()), shade)
check("the chunks of a kind differ in shade", len({next(iter(shade[("F", c)])) for c in range(v)}) == v, shade)

check("the file holds a window on the start of the step", '<svg id="zoom"' in text and 'id="zoom-caption"' in text)
zoom = text[text.find('<svg id="zoom"'):]
wide = re.findall(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)" height="\d+" fill="#[^>]*><title>F ', zoom)
check("in the window the forward blocks are wide enough to label (12 px or more)",
      wide and min(float(w) for w in wide[:10]) >= 12, wide[:10])
# Each block's label names its chunk (and micro-batch where it fits): the tooltip's.
labelled = re.findall(r'<title>F (\d+) chunk (\d+) [^<]*</title></rect>\n<text [^>]*>(c\d+(?:/\d+)?)</text>', zoom)
check("in the window the forward blocks are labelled c<chunk>/<micro-batch>",
      len(labelled) >= 10 and all(t in (f"c{c}/{m}", f"c{c}") for m, c, t in labelled)
      and any("/" in t for _, _, t in labelled), labelled[:10])

keys = re.findall(r'<rect class="chunk-key" [^>]*fill="([^"]+)"', whole)
others = re.findall(r'<rect class="key" [^>]*fill="([^"]+)"', whole)[1:]  # all but forward's own
check(f"a colour key for each of the {v} chunks", len(keys) == v, keys)
close = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if distance(a, b) < 40]
check("chunk colours differ from each other (RGB distance 40 or more)", not close and len(keys) == v, close)
near = [(a, b) for a in keys for b in others if distance(a, b) < 40]
check("chunk colours differ from the legend's other colours", not near and others, (near, others))

shutil.rmtree(tmp, ignore_errors=True)
finish()
