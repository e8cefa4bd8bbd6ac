"""The interleaved timeline SVG reads: each stage is a group of one sub-row per chunk (no
striped texture of alternating chunks on one row), the file holds a window on the start of the
step where the blocks are wide enough to read, and the chunks' colours differ from each other
and from the legend's other colours."""
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

labels = re.findall(r">chunk (\d+)</text>", whole)
check(f"one sub-row per chunk in each of the {pp} stage groups", labels == [str(c) for _ in range(pp) for c in range(v)],
      labels)

# Every forward block of one stage and chunk on one sub-row; the chunks of a stage on different ones.
rows = {}
for y, fill, tip in re.findall(r'<rect x="[\d.]+" y="(\d+)" width="[\d.]+" height="\d+" fill="([^"]+)"[^>]*>'
                               r'<title>F (\d+ chunk \d+)', whole):
    rows.setdefault(int(tip.split()[-1]), set()).add(int(y))
check("each chunk's forward blocks keep to their sub-rows (one y per stage)",
      sorted(rows) == list(range(v)) and all(len(ys) == pp for ys in rows.values()), rows)
check("the chunks' sub-rows differ", len(set().union(*rows.values())) == pp * v if rows else False, rows)

check("the file holds a window on the start of the step", '<svg id="zoom"' in text and 'id="zoom-caption"' in text)
zoom = text[text.find('<svg id="zoom"'):]
wide = re.findall(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)" height="\d+" fill="hsl[^>]*><title>F ', zoom)
check("in the window the forward blocks are wide enough to label (12 px or more)",
      wide and min(float(w) for w in wide[:10]) >= 12, wide[:10])

keys = re.findall(r'<rect class="chunk-key" [^>]*fill="([^"]+)"', whole)
others = re.findall(r'<rect class="key" [^>]*fill="([^"]+)"', whole)[1:]  # all but forward's own
check(f"a colour key for each of the {v} chunks", len(keys) == v, keys)
close = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if distance(a, b) < 40]
check("chunk colours differ from each other (RGB distance 40 or more)", not close and len(keys) == v, close)
near = [(a, b) for a in keys for b in others if distance(a, b) < 40]
check("chunk colours differ from the legend's other colours", not near and others, (near, others))

shutil.rmtree(tmp, ignore_errors=True)
finish()
