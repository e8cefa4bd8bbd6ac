#!/usr/bin/env python3
"""Hostile inputs to `trident rehearse` and `trident bench`: each refused by name before anything
runs (exit 2 within a time limit, no raw library text), or, for --tp-across, accepted.

  - --scale -1 / nan, --ranks 0, --link-gbytes-per-s 0 or without emulated hosts;
  - --out naming the plan file (an input), --out naming a regular file;
  - a bench file without measurements, a bench file whose link has zero bandwidth (it reached tc);
  - a link of 1e-9 GB/s (it hung the rehearsal): refused before anything is shaped;
  - `bench --alltoall-step-calls 4096` with a 1 GiB working set (it ran for minutes);
  - --tp-across on the Llama 3 70B plan (order tp-cp-ep-dp-pp): the dry run takes an order train
    accepts, and --dry-run refuses what the run would (a bad bench file too).
usage: rehearse_inputs_test.py TRIDENT
"""
import os
import re
import sys
import tempfile

from value_refusals_test import run  # one way to run a command with a time limit

failures = []
RAW = ["std::", "what():", "filesystem error", "FORCE-TERMINATE", "Error: ", "Traceback"]

BENCH = """[cluster]
nodes = 1
gpus-per-node = 2
gpu-memory-gib = 11.770
gpu-fp32-tflops = 0.157413
gpu-bf16-tflops = 0.157413
gpu-hbm-gbytes-per-s = 70.131
intra-link = "pcie"
intra-gbytes-per-s = {intra}
intra-latency-us = 0.241
inter-link = "ethernet"
inter-node-gbytes-per-s = 21.8726
inter-latency-us = 0.241

[cost]
gemm_peak_efficiency = 1.0000
gemm_half_dim = 19.73
kernel_launch_us = 1.4220
hbm_efficiency = 0.9469
optimizer_bytes_per_param = 166.089
pcie_efficiency = 0.5943
network_efficiency = 0.5943
alltoall_efficiency = 0.0065
alltoall_latency_us = 54.163
"""


def refused(args, *needles, timeout=60):
    """The command exits 2 within the time limit, says every needle and no raw library text."""
    rc, out = run(args, timeout)
    missing = [n for n in needles if n not in out]
    raw = [x for x in RAW if x in out]
    if rc != 2 or missing or raw:
        failures.append("%s\n    exit %s, missing %s, raw %s:\n%s" % (" ".join(args[1:]), rc, missing, raw,
                                                                     out.strip()[-1500:]))


def main():
    t = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-rehearse-inputs-")
    plan = os.path.join(d, "plan.toml")
    rc, out = run([t, "plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64",
                   "--global-batch-size", "1024", "--emit", plan])
    if rc != 0:
        print("FAIL: plan --emit: exit %s\n%s" % (rc, out[-2000:]))
        return 1
    good, empty, zero = (os.path.join(d, n) for n in ("bench.toml", "empty.toml", "zero.toml"))
    with open(good, "w") as f:
        f.write(BENCH.format(intra="10.9363"))
    with open(zero, "w") as f:
        f.write(BENCH.format(intra="0"))
    with open(empty, "w") as f:
        f.write("[cluster]\nnodes = 1\n")
    rehearse = [t, "rehearse", "--config", plan, "--out", os.path.join(d, "out")]

    # Values out of range, and flags that would be ignored.
    refused(rehearse + ["--scale", "-1"], "--scale -1 is outside (0, 1]")
    refused(rehearse + ["--scale", "nan"], "--scale nan is outside (0, 1]")
    refused(rehearse + ["--ranks", "0"], "--ranks 0 is outside 1 .. 64")
    refused(rehearse + ["--hosts", "2", "--link-gbytes-per-s", "0"], "--link-gbytes-per-s 0 is outside (0, 100]")
    refused(rehearse + ["--link-gbytes-per-s", "0.05"], "--link-gbytes-per-s shapes the link between emulated hosts")

    # --out over an input, or a file where a folder is meant.
    refused([t, "rehearse", "--config", plan, "--out", plan], "--out '%s' is --config" % plan, "which this command reads")
    afile = os.path.join(d, "a file")
    with open(afile, "w") as f:
        f.write("x\n")
    refused([t, "rehearse", "--config", plan, "--out", afile], "--out", afile)

    # Bench files: without measurements, with a zero-bandwidth link (refused before tc sees it),
    # and a link too slow to finish (refused before anything is shaped, not hung).
    refused(rehearse + ["--bench", empty], "--bench '%s' holds no measurement of gpu-fp32-tflops" % empty)
    refused(rehearse + ["--bench", empty, "--dry-run"], "holds no measurement")
    refused(rehearse + ["--bench", zero, "--hosts", "2"], "--bench '%s'" % zero, "intra-node bandwidth is not positive")
    refused(rehearse + ["--bench", good, "--hosts", "2", "--link-gbytes-per-s", "1e-9"],
            "a link of 1e-09 GB/s per host is too slow to finish", "give --link-gbytes-per-s", timeout=30)

    # The bench's all-to-all sweep: 4096 calls a step after 1 GiB each is refused, not run for minutes.
    refused([t, "bench", "--out", os.path.join(d, "b.toml"), "--alltoall-step-calls", "4096",
             "--alltoall-working-set-mib", "1024"], "--alltoall-step-calls 4096", timeout=30)

    # --tp-across on the plan's order tp-cp-ep-dp-pp: an order train accepts, checked by the dry run.
    rc, out = run(rehearse + ["--hosts", "2", "--tp-across", "--dry-run", "--bench", good])
    m = re.search(r"train \(TP across hosts, order ([a-z-]+)\)", out)
    if rc != 0 or not m or "does not put ep next to dp" in out:
        failures.append("rehearse --tp-across --hosts 2 --dry-run: exit %s, want an accepted order:\n%s" % (rc, out[-2500:]))
    elif not re.search(r"(^|-)ep-dp(-|$)|(^|-)dp-ep(-|$)", m.group(1)):
        failures.append("TP-across order %s does not keep ep next to dp" % m.group(1))

    print("rehearse inputs: %d failures" % len(failures))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
