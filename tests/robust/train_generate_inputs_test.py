#!/usr/bin/env python3
"""Hostile inputs of train and generate: a --prediction-cluster file with a zero bandwidth is
refused before any step (exit 2, naming the key), not found by the planner after the run;
`generate` writing to a full disk (> /dev/full) reports the failed write with exit 1.
usage: train_generate_inputs_test.py TRIDENT"""
import os
import shutil
import subprocess
import sys
import tempfile

from robust_cases import TINY, check, finish, refused, run, train

CLUSTER = ("[cluster]\nnodes = 1\ngpus-per-node = 2\ngpu-memory-gib = 4\ngpu-fp32-tflops = 0.05\n"
           "gpu-bf16-tflops = 0.05\ngpu-hbm-gbytes-per-s = 20\nintra-link = \"pcie\"\nintra-gbytes-per-s = {intra}\n"
           "intra-latency-us = 1\ninter-link = \"ethernet\"\ninter-node-gbytes-per-s = {inter}\ninter-latency-us = 10\n")


def main():
    trident = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-train-generate-")
    p = lambda name: os.path.join(d, name)

    # A zero bandwidth (intra or inter node) in the prediction's cluster file: refused before step 1.
    for key, intra, inter in [("intra", 0, 10), ("inter", 5, 0)]:
        with open(p(key + ".toml"), "w") as f:
            f.write(CLUSTER.format(intra=intra, inter=inter))
        rc, out = run(trident, "train", *TINY, "--steps", "2", "--prediction-cluster", p(key + ".toml"), "--report",
                      p("r.json"))
        refused("--prediction-cluster with a zero %s-node bandwidth is refused" % key, (rc, out),
                "%s_gbytes_per_s" % ("intra" if key == "intra" else "inter_node"), key + ".toml")
        check("  ... before any step", "step " not in out and not os.path.exists(p("r.json")), out[-600:])
    with open(p("good.toml"), "w") as f:
        f.write(CLUSTER.format(intra=5, inter=10))
    rc, out = run(trident, "train", *TINY, "--steps", "2", "--prediction-cluster", p("good.toml"), "--report",
                  p("r.json"))
    check("--prediction-cluster with positive bandwidths trains and predicts", rc == 0 and "planner failed" not in
          open(p("r.json")).read(), out[-600:])

    # generate > /dev/full: the text cannot be written, which must be said, with exit 1.
    ck = train(trident, p("ck"))
    with open("/dev/full", "w") as full:
        r = subprocess.run([trident, "generate", "--checkpoint", ck, "--tokens", "5", "--threads", "1"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    check("generate > /dev/full exits 1", r.returncode == 1, "exit %d: %s" % (r.returncode, r.stderr[-500:]))
    check("generate > /dev/full says the write failed", "standard output" in r.stderr and "No space" in r.stderr,
          r.stderr[-500:])
    r = subprocess.run([trident, "generate", "--checkpoint", ck, "--tokens", "5", "--threads", "1"],
                       capture_output=True, timeout=120)  # bytes: a tiny model's tokens need not be UTF-8
    check("generate to a pipe still works", r.returncode == 0 and len(r.stdout) > 0, r.stderr[-300:])

    shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
