"""trident models / trident clusters list every preset the planner accepts, with the figures it
plans with: each model's parameter counts equal topo's, each cluster's GPU and links equal the
description a plan prints, and the JSON lists exactly the names the did-you-mean errors offer."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]


def run(*args, want=0):
    p = subprocess.run([trident, *args], capture_output=True, text=True)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}, want {want}\n{p.stdout}\n{p.stderr}")
    return p


def offered(flag):
    """The names an unknown --FLAG value is answered with ("use one of a, b or c")."""
    base = {"model": ["--cluster", "dgx-h100"], "cluster": ["--model", "gpt3-125m"],
            "gpu": ["--model", "gpt3-125m", "--cluster", "dgx-h100"]}[flag]
    err = run("topo", f"--{flag}", "no-such-name", *base, "--nodes", "1", want=2).stderr
    m = re.search(r"use one of (.*?)(?:,? or describe|\n|$)", err)
    text = m.group(1).replace(" or ", ", ")
    return sorted(n.strip() for n in text.split(",") if n.strip())


models = json.loads(run("models", "--json").stdout)["models"]
check("models: exactly the presets --model accepts", sorted(m["name"] for m in models) == offered("model"),
      ([m["name"] for m in models], offered("model")))
for m in models:
    topo = run("topo", "--model", m["name"], "--cluster", "dgx-h100", "--nodes", "1").stdout
    got = re.search(r"= ([0-9.]+) B parameters(?: \(([0-9.]+) B active)?", topo)
    total = float(got.group(1))
    active = float(got.group(2)) if got.group(2) else total
    check(f"models: {m['name']} parameters as topo counts them",
          abs(m["params_total"] / 1e9 - total) < 0.006 and abs(m["params_active"] / 1e9 - active) < 0.006,
          (m["params_total"], m["params_active"], got.group(0)))
    check(f"models: {m['name']} shape as topo describes it",
          f"{m['layers']} layers, hidden {m['hidden']}" in topo, topo.splitlines()[1])
text = run("models").stdout
check("models: a table row per preset", all(re.search(rf"^{re.escape(m['name'])}\s", text, re.M) for m in models), text)

cat = json.loads(run("clusters", "--json").stdout)
check("clusters: exactly the presets --cluster accepts", sorted(c["name"] for c in cat["clusters"]) == offered("cluster"))
check("clusters: exactly the GPUs --gpu accepts", sorted(g["name"] for g in cat["gpus"]) == offered("gpu"))
for c in cat["clusters"]:
    desc = run("topo", "--cluster", c["name"], "--nodes", "2", "--model", "gpt3-125m").stdout.splitlines()[2]
    check(f"clusters: {c['name']} as a plan describes it",
          f"of {c['gpu']}:" in desc and f"{c['intra_link']} {c['intra_gbps_per_gpu']:g} GB/s per GPU" in desc
          and f"= {c['inter_gbps_per_gpu']:.3g} GB/s per GPU" in desc
          and c["gpus_per_nvlink_domain"] == c["gpus_per_node"] * c["hosts_per_nvlink_domain"], (c, desc))
for g in cat["gpus"]:
    desc = run("topo", "--cluster", "dgx-h100", "--gpu", g["name"], "--nodes", "1", "--model", "gpt3-125m").stdout.splitlines()[2]
    check(f"clusters: GPU {g['name']} as a plan describes it",
          f"of {g['gpu']}: {g['memory_gib']:.3g} GiB, {g['bf16_tflops']:.3g} TFLOP/s bf16" in desc, (g, desc))
text = run("clusters").stdout
check("clusters: a row per cluster and GPU",
      all(re.search(rf"^{re.escape(n['name'])}\s", text, re.M) for n in cat["clusters"] + cat["gpus"]), text)
run("models", "--bogus", want=2)
finish()
