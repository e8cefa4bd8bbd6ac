#!/usr/bin/env python3
"""Hostile inputs on plan, lint and the emitted launches (issue 51 item 7):
  - standard output on a full disk (> /dev/full): `plan`, `plan --json`, `--emit megatron`,
    `--emit slurm`, `lint` exit 1 naming the failed write (they exited 0);
  - a config with a million unknown keys (at the top level and in [cluster]) is refused fast
    (it ran past 60 s; now about 3 s of CPU), exit 2, the unknown keys reported as a capped list with their count;
  - an option given twice (`rehearse --bench A --bench B`, `plan --model a --model b`) is refused
    by name, exit 2 (CLI11 said "At Most 1 required but received 2").
usage: plan_outputs_test.py TRIDENT
"""
import os
import subprocess
import sys
import tempfile
import resource

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

t = os.path.abspath(sys.argv[1])
PLAN = ["--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g", "--nodes", "1", "--global-batch-size", "64", "--top", "1"]


def run(args, timeout=120, stdout=subprocess.PIPE):
    """Exit code, stdout, stderr and the CPU seconds the command used (user + system: what a
    loaded machine does not change, unlike the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run([t, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, "", f"(no answer in {timeout} s)", float(timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.returncode, r.stdout or "", r.stderr, cpu


# Standard output on a full disk.
with open("/dev/full", "w") as full:
    for what, args in [("plan", ["plan", *PLAN]), ("plan --json", ["plan", *PLAN, "--json"]),
                       ("plan --emit megatron", ["plan", *PLAN, "--emit", "megatron"]),
                       ("plan --emit slurm", ["plan", *PLAN, "--emit", "slurm"]),
                       ("lint", ["lint", *PLAN[:-2], "--tp", "1", "--pp", "1"])]:
        rc, _, err, _ = run(args, stdout=full)
        check(f"{what} > /dev/full: exit 1 naming the failed write", rc == 1 and "standard output" in err
              and "No space left on device" in err, f"exit {rc}: {err[-400:]}")

# A million unknown keys: refused in seconds, with a capped list and the count.
with tempfile.TemporaryDirectory() as d:
    for where in ("top", "cluster"):
        path = os.path.join(d, f"keys-{where}.toml")
        with open(path, "w") as f:
            if where == "cluster":
                f.write("[cluster]\n")
            f.write("".join(f"k{i}=1\n" for i in range(1_000_000)))
        rc, out, err, took = run(["plan", "--config", path, *PLAN])
        check(f"a million unknown keys ({where}): exit 2", rc == 2, f"exit {rc}: {err[-300:]}")
        # Reading the file takes about 3 s of CPU; a suggestion for each key took minutes.
        check(f"a million unknown keys ({where}): refused within 15 s of CPU", took < 15, f"{took:.1f} s")
        listed = err.count("unknown key '")
        check(f"a million unknown keys ({where}): a capped list with the count", 0 < listed <= 20
              and "1000000 unknown keys" in err, f"{listed} listed: {err[:300]} ... {err[-300:]}")

# An option given twice.
for what, args, name in [("rehearse --bench twice", ["rehearse", "--bench", "a.toml", "--bench", "b.toml"], "--bench"),
                         ("plan --model twice", ["plan", *PLAN, "--model", "gpt3-175b"], "--model")]:
    rc, out, err, _ = run(args)
    check(f"{what}: exit 2 naming the option", rc == 2 and f"{name} is given 2 times" in err
          and "At Most" not in err, f"exit {rc}: {err[-400:]}")

finish()
