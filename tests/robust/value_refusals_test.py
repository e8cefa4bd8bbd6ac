#!/usr/bin/env python3
"""Values that were accepted silently, or refused with a wrong text, through the command line.

One check per case, each with the command it runs; every case must end (a time limit each), exit
2 and say what it names below:
  - size arithmetic: --stage-layers near 2^62 that wrap around 64 bits to the model's layers;
  - unbounded reads: /dev/zero, a FIFO or a directory where a regular file is meant;
  - cost values: 0 or above 1 for a share, as a flag and in a cost file; a key that changes nothing;
  - messages: --seed / --tokens beyond 64 bits in the text given, --cp -1 with the real range,
    one bad --cp said once with one code, data prepare counting only the bytes it read.
usage: value_refusals_test.py TRIDENT
"""
import os
import re
import subprocess
import sys
import tempfile

failures = []


def run(args, timeout=60):
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return None, "(no answer in %ss)" % timeout
    return r.returncode, r.stdout + r.stderr


def refused(args, *needles, timeout=60):
    """The command exits 2 within the time limit and its output holds every needle."""
    rc, out = run(args, timeout)
    missing = [n for n in needles if n not in out]
    if rc != 2 or missing or "std::" in out or "what():" in out:
        failures.append("%s\n    exit %s, missing %s:\n%s" % (" ".join(args[1:]), rc, missing, out.strip()[-1200:]))


def main():
    t = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-values-")
    plan = [t, "plan", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g", "--nodes", "1",
            "--global-batch-size", "64", "--top", "1"]
    tiny = ["--layers", "4", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--steps", "1", "--threads", "1"]

    # Size arithmetic: 4 x 2^62 + 4 wraps to 4, the model's layers.
    q = 1 << 62
    refused([t, "train"] + tiny + ["--pp", "4", "--stage-layers", "%d,%d,%d,%d" % (q, q, q, q + 4)],
            "--stage-layers", "more than 2^62", "1 to 4")
    refused([t, "train"] + tiny + ["--pp", "2", "--stage-layers", "3,1x"], "'1x' is not a whole number")

    # Unbounded reads and special files.
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    refused([t, "data", "prepare", "/dev/zero", os.path.join(d, "z.tok")], "'/dev/zero' is a character device",
            timeout=30)
    refused([t, "data", "prepare", fifo, os.path.join(d, "f.tok")], "is a FIFO (named pipe)", timeout=30)
    refused([t, "train"] + tiny + ["--data", fifo], "token file '%s' is a FIFO (named pipe)" % fifo, timeout=30)
    refused([t, "train"] + tiny + ["--data", d], "is a directory, not a regular file", timeout=30)
    refused(plan + ["--cost", fifo], "cost table '%s' is a FIFO" % fifo, timeout=30)
    refused(plan + ["--config", fifo], "config file '%s' is a FIFO" % fifo, timeout=30)
    os.makedirs(os.path.join(d, "ckpt"))
    os.mkfifo(os.path.join(d, "ckpt", "manifest.json"))
    refused([t, "generate", "--checkpoint", os.path.join(d, "ckpt")], "manifest.json' is a FIFO", timeout=30)

    # Cost values: a share of 0 divides a time by zero (Step -nan s), above 1 beats the hardware.
    for key in ["gemm-peak-efficiency", "hbm-efficiency", "nvlink-efficiency", "attention-efficiency"]:
        for v in ["0", "1.5"]:
            refused(plan + ["--" + key, v], "--%s %s is outside its range (above 0 and at most 1)" % (key, v))
        cost = os.path.join(d, key + ".toml")
        with open(cost, "w") as f:
            f.write("[default]\n%s = 0\n" % key.replace("-", "_"))
        refused(plan + ["--cost", cost], "cost key '%s'" % key.replace("-", "_"), "= 0 is outside its range")
    # A key the table printed but the model never applied is gone, not silently ignored.
    refused(plan + ["--zero3-volume-factor", "2"], "zero3-volume-factor")

    # Messages: the text the user gave, the real range, one rule once.
    refused([t, "generate", "--checkpoint", d, "--seed", "18446744073709551616"],
            "--seed 18446744073709551616 is outside its range 0 .. 2147483647")
    refused([t, "generate", "--checkpoint", d, "--tokens", "99999999999999999999"],
            "--tokens 99999999999999999999 is outside its range 1 .. 1000000")
    refused([t, "train"] + tiny + ["--seed", "18446744073709551616"], "--seed 18446744073709551616 is outside its range")
    refused(plan + ["--cp", "-1"], "--cp -1 is outside its range 1 .. 2147483647")
    rc, out = run([t, "train"] + tiny + ["--cp", "3", "--dp", "1"])
    if rc != 2 or out.count("2 x cp = 6") != 1 or "code: cp-divides-sequence" not in out or "cp-divides-seq\n" in out:
        failures.append("train --cp 3 --seq-len 16: want one problem 'not divisible by 2 x cp = 6' "
                        "[cp-divides-sequence], got exit %s:\n%s" % (rc, out.strip()[-1500:]))
    blob = os.path.join(d, "blob.bin")
    with open(blob, "wb") as f:
        f.write(bytes(range(256)) * 3 + b"\x00\xff")  # 770 bytes, no newline at the end
    rc, out = run([t, "data", "prepare", blob, os.path.join(d, "blob.tok")])
    if rc != 0 or not re.search(r": 770 tokens .* from 770 bytes", out):
        failures.append("data prepare of a 770-byte binary file: want 770 tokens from 770 bytes, got exit %s: %s"
                        % (rc, out.strip()))

    print("value refusals: %d failures" % len(failures))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
