"""A ZeRO-1 rehearsal (mpirun -np 2 trident train --dp 2 --zero 1) and an expert-parallel one
(--dp 2 --ep 2, 8 experts top-2) with a prediction: the text report, its JSON and its HTML page
list the same share rows, and in each the rows of the step (all but the "of it" / "of which"
parts) add to 100%, measured and predicted. The EP all-to-all's time is split into the collective's
own time (last entry to last exit) and the wait for the slower peer, per step and rank; the
planner's prediction of that wait takes the load imbalance the steps measured, checked by hand
against the metrics file's tokens per expert."""
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


def shares(name, layout, want_rows):
    """Runs the rehearsal; checks its rows in the text, the JSON and the HTML; returns the JSON."""
    report, page = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".html")
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", trident, "train", "--dp", "2", *layout,
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
    for label in want_rows:
        check(f"{name} text: {label} is a row", label in labels_text, labels_text)

    rows = json.load(open(report))["share_rows"]
    check(f"{name} JSON and text: the same rows", [r["label"].strip() for r in rows] == labels_text,
          ([r["label"] for r in rows], labels_text))
    whole = [r for r in rows if r["part_of"] is None]
    for column in ("measured", "predicted"):
        total = sum(r[column] for r in whole)
        check(f"{name} JSON: the {column} shares add to 100% ({100 * total:.4f}%)", abs(total - 1) < 1e-9, total)

    html = open(page).read()
    table = html[html.index('id="rehearsal-shares"'):]
    table = table[:table.index("</table>")]
    # A part the planner does not predict apart (the norm's all-reduce wait) shows "-" predicted.
    cells = re.findall(r"<tr><td>([^<]*)</td><td>(-?[\d.]+)%</td><td>(-?[\d.]+%|-)</td></tr>", table)
    check(f"{name} HTML and text: the same rows", [c[0].strip() for c in cells] == labels_text, (cells, labels_text))
    for i, column in ((1, "measured"), (2, "predicted")):
        total = sum(float(c[i].rstrip("%")) for c in cells if not c[0].strip().startswith("of "))
        # Each cell is rounded to 0.1%: the sum is within half of that per row.
        check(f"{name} HTML: the {column} shares add to 100% ({total:.1f}%)", abs(total - 100) <= 0.05 * len(cells), total)
    return json.load(open(report))


shares("ZeRO-1", ["--zero", "1"], ["of it ZeRO gathers"])
j = shares("EP", ["--ep", "2", "--family", "llama", "--experts", "8", "--experts-per-token", "2",
                  "--expert-ffn-hidden", "32", "--no-moe-drop"], ["EP all-to-all", "EP wait (peers)"])
# The two ranks share this host's clock: aligning them leaves a few microseconds at most.
check("EP: the ranks' clocks were aligned (error bound > 0, under 1 ms)",
      0 < j["ep_clock_error_s"] < 1e-3, j["ep_clock_error_s"])
cells = [r for s in j["steps"] for r in s["ranks"]]
check("EP: every step and rank has a collective part and a wait part, neither negative",
      all(r["ep_alltoall_s"] > 0 and r["ep_wait_s"] >= 0 for r in cells), cells[:2])
# Two ranks never reach every all-to-all at the same instant: some wait reaches the report.
check("EP: the wait for the peer is in the report", any(r["ep_wait_s"] > 0 for r in cells), cells[:2])
# The planner's wait comes from the load imbalance the steps measured (the most loaded rank's rows
# over the mean, per step; the median after the warm-up): positive exactly when it is above 1.
per_step = j["measured"].get("ep_load_imbalance", [])
check("EP: each step's load imbalance is measured (at least 1, at most the ep size)",
      len(per_step) == len(j["steps"]) and all(1 <= x <= 2 for x in per_step), per_step)
used = j["predicted"]["ep_load_imbalance"]
after = sorted(per_step[j["warmup_steps"]:])
mid = (after[(len(after) - 1) // 2] + after[len(after) // 2]) / 2
check("EP: the prediction takes the median over the measured steps", abs(used - max(1.0, mid)) < 1e-12, (used, after))
wait = [r["predicted"] for r in j["share_rows"] if r["key"] == "ep_wait"]
check("EP: the planner predicts a wait for the most loaded rank exactly when it is loaded more",
      len(wait) == 1 and (wait[0] > 0) == (used > 1), (wait, used))

# By hand: one MoE layer and one micro-batch per rank (global batch 2 over dp 2 = ep 2), no dropping:
# rank q's experts (4q .. 4q+3) receive every assignment routed to them, so each step's imbalance is
# the larger rank's sum of tokens_per_expert over the mean of the two, from the metrics file.
metrics = os.path.join(tmp, "metrics.jsonl")
p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", trident, "train", "--dp", "2", "--ep", "2", "--family", "llama",
                    "--experts", "8", "--experts-per-token", "2", "--expert-ffn-hidden", "32", "--no-moe-drop",
                    "--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--global-batch-size", "2",
                    "--micro-batch-size", "1", "--steps", "4", "--threads", "1", "--comm-timeout", "120",
                    "--metrics", metrics], capture_output=True, text=True, env=env, timeout=240)
check("EP by hand: the run trains", p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:])
lines = [json.loads(x) for x in open(metrics)] if p.returncode == 0 else []
for line in lines:
    tpe = line["moe_routing"][0]["tokens_per_expert"]
    rows = [sum(tpe[0:4]), sum(tpe[4:8])]
    want = max(rows) / (sum(rows) / 2)
    check(f"EP by hand: step {line['step']}'s load imbalance is the busier rank's rows over the mean ({want:.6f})",
          abs(line.get("ep_load_imbalance", 0) - want) < 1e-12, (line.get("ep_load_imbalance"), rows))
check("EP by hand: every step has its line", len(lines) == 4, len(lines))

shutil.rmtree(tmp, ignore_errors=True)
finish()
