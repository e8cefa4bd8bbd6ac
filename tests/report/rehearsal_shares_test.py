"""A ZeRO-1 rehearsal (mpirun -np 2 trident train --dp 2 --zero 1) with a prediction: the text
report, its JSON and its HTML page list the same share rows, and in each the rows of the step
(all but the "of it" / "of which" parts) add to 100%, measured and predicted."""
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


cluster = os.path.join(tmp, "cluster.toml")
open(cluster, "w").write("[cluster]\ngpu_memory_gib = 16\ngpu_bf16_tflops = 0.1\ngpu_fp32_tflops = 0.05\n"
                         "gpu_hbm_gbytes_per_s = 10\ngpus_per_node = 2\nnodes = 1\nintra_link = \"pcie\"\n"
                         "intra_gbytes_per_s = 5\nintra_latency_us = 5\ninter_link = \"ethernet\"\n"
                         "inter_node_gbytes_per_s = 1\ninter_latency_us = 50\n")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
report, page = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.html")
p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", trident, "train", "--dp", "2", "--zero", "1",
                    "--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--global-batch-size", "4",
                    "--micro-batch-size", "1", "--steps", "4", "--threads", "1", "--comm-timeout", "120",
                    "--prediction-cluster", cluster, "--report", report, "--html", page],
                   capture_output=True, text=True, env=env, timeout=240)
if p.returncode != 0:
    raise SystemExit(f"FAIL trident train: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")

# Text: the rows between "share of step time" and "step time".
text = p.stdout[p.stdout.index("share of step time"):]
text_rows = re.findall(r"^  (\S.*?|  of .*?)\s+(-?[\d.]+)%\s+(-?[\d.]+%|-)\s*$", text.split("  step time")[0], re.M)
labels_text = [r[0].strip() for r in text_rows]
check("text: the ZeRO gathers are a row", "of it ZeRO gathers" in labels_text, labels_text)

rows = json.load(open(report))["share_rows"]
check("JSON and text: the same rows", [r["label"].strip() for r in rows] == labels_text,
      ([r["label"] for r in rows], labels_text))
whole = [r for r in rows if r["part_of"] is None]
for column in ("measured", "predicted"):
    total = sum(r[column] for r in whole)
    check(f"JSON: the {column} shares add to 100% ({100 * total:.4f}%)", abs(total - 1) < 1e-9, total)

html = open(page).read()
table = html[html.index('id="rehearsal-shares"'):]
table = table[:table.index("</table>")]
cells = re.findall(r"<tr><td>([^<]*)</td><td>(-?[\d.]+)%</td><td>(-?[\d.]+)%</td></tr>", table)
check("HTML and text: the same rows", [c[0].strip() for c in cells] == labels_text, (cells, labels_text))
for i, column in ((1, "measured"), (2, "predicted")):
    total = sum(float(c[i]) for c in cells if not c[0].strip().startswith("of "))
    # Each cell is rounded to 0.1%: the sum is within half of that per row.
    check(f"HTML: the {column} shares add to 100% ({total:.1f}%)", abs(total - 100) <= 0.05 * len(cells), total)

shutil.rmtree(tmp, ignore_errors=True)
finish()
