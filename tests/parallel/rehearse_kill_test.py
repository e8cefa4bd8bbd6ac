#!/usr/bin/env python3
"""`trident rehearse` killed with SIGKILL (no handler runs) leaves nothing behind: its supervisor
ends mpirun and the ranks, and removes the emulated hosts' namespaces, links and qdiscs.

  1. one host: killed while it trains; within 30 s no process names the rehearsal's folder;
  2. two emulated hosts (root, `ip netns`): killed while it measures the link; within 30 s no
     namespace, link or qdisc of its prefix, and no process names its folder or its subnet
     (mpirun, orted, trident).
Part 1 always runs; part 2 is skipped (and says so) when not root.
usage: rehearse_kill_test.py TRIDENT
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "robust"))
from rehearse_hosts_test import run_interrupted  # noqa: E402  (the same way to signal a run)
from rehearse_inputs_test import BENCH  # noqa: E402  (the same synthetic bench file)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def processes_naming(*needles):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(n in cmd for n in needles):
            found.append("%s: %s" % (pid, cmd[:160]))
    return found


def net_leftovers(prefix):
    text = ""
    for cmd in (["ip", "netns", "list"], ["ip", "link"], ["tc", "qdisc", "show"]):
        text += subprocess.run(cmd, capture_output=True, text=True).stdout
    return [line for line in text.splitlines() if re.search(r"\b" + prefix + r"[-bvp]", line)]


def kill_when(cmd, env, wait_for):
    """Starts cmd, SIGKILLs it a second after a line holding wait_for; returns its output."""
    code, out = run_interrupted(cmd, env, wait_for, signal.SIGKILL, None)
    if code != -signal.SIGKILL:
        fail("not killed while '%s' (exit %s):\n%s" % (wait_for, code, out[-3000:]))
    return out


def gone_within(seconds, check):
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = check()
        if not left:
            return []
        time.sleep(0.5)
    return check()


def main():
    t = os.path.abspath(sys.argv[1])
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    d = tempfile.mkdtemp(prefix="trident-rehearse-kill-")
    plan, bench = os.path.join(d, "plan.toml"), os.path.join(d, "bench.toml")
    subprocess.run([t, "plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "64",
                    "--global-batch-size", "1024", "--emit", plan], check=True, capture_output=True, env=env)
    with open(bench, "w") as f:
        f.write(BENCH.format(intra="10.9363"))

    # 1. One host, killed while training (2 ranks, long enough to be caught running).
    out_dir = os.path.join(d, "one-host")
    cmd = [t, "rehearse", "--config", plan, "--bench", bench, "--ranks", "2", "--steps", "1000", "--out", out_dir]
    kill_when(cmd, env, "running the rehearsal")
    left = gone_within(30, lambda: processes_naming(out_dir))
    if left:
        fail("one host: processes left 30 s after SIGKILL:\n  " + "\n  ".join(left))
    print("ok: one host, SIGKILL while training: no mpirun or rank left")

    # 2. Two emulated hosts, killed while measuring the link.
    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print("skipped part 2: emulated hosts need root and `ip netns`")
        return 0
    out_dir = os.path.join(d, "two-hosts")
    cmd = [t, "rehearse", "--config", plan, "--bench", bench, "--hosts", "2", "--ranks", "4", "--steps", "100",
           "--out", out_dir]
    out = kill_when(cmd, env, "measuring the link")
    m = re.search(r"network namespaces (tr[0-9]+)-h0.* \(([0-9.]+)\.0/24\)", out)
    if not m:
        fail("no emulated hosts were made before the kill:\n" + out[-3000:])
    prefix, subnet = m.group(1), m.group(2) + "."
    left = gone_within(30, lambda: net_leftovers(prefix) + processes_naming(out_dir, subnet))
    if left:
        fail("two hosts: left 30 s after SIGKILL:\n  " + "\n  ".join(left))
    print("ok: two emulated hosts, SIGKILL while measuring the link: no namespace, link, qdisc or process left (%s)"
          % prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
