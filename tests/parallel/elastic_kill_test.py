#!/usr/bin/env python3
"""`trident train --elastic`: one rank of an 8-rank run (dp 2 x tp 2 x pp 2, 4 "nodes" of 2 ranks)
is killed (SIGKILL) between two saves. The supervisor names it, re-plans on the 3 nodes left
(replan's function), resumes from the checkpoint on the new layout, and
  - the losses after the restart equal (1e-5) those of an uninterrupted run of the same layout
    started from the same checkpoint (the step-10 checkpoint, copied when the rank is killed),
  - the data position continues: the resumed steps are checkpoint+1.. without a gap, and their
    losses are the killed run's losses at the same steps (another layout, the same samples),
  - the event (lost rank and node, steps, time lost) is in the metrics file and the report,
  - nothing is left running, also when the supervisor itself is killed (SIGKILL).
usage: elastic_kill_test.py TRIDENT"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

trident = os.path.abspath(sys.argv[1])
work = tempfile.mkdtemp(prefix="trident-elastic-")
tag = f"elastic-{os.getpid()}"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
           TRIDENT_TEST_TAG=tag)
MPIRUN = "mpirun --oversubscribe --bind-to none"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def tagged(rank=None):
    """pids of this test's processes (by the tag in their environment), optionally one rank's"""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                e = f.read().split(b"\0")
        except OSError:
            continue
        if f"TRIDENT_TEST_TAG={tag}".encode() not in e:
            continue
        if rank is None or f"OMPI_COMM_WORLD_RANK={rank}".encode() in e:
            found.append(int(p))
    return found


def nothing_left(what, wait_s=15):
    end = time.time() + wait_s
    while tagged() and time.time() < end:
        time.sleep(0.2)
    left = tagged()
    check(not left, f"{what}: no process left running ({left})")


def lines(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def last_step(path):
    try:
        return max([j["step"] for j in lines(path)] or [0])
    except (OSError, ValueError):
        return 0


with open(os.path.join(work, "cluster.toml"), "w") as f:
    f.write("""# This machine's cores as "GPUs" (the shape `trident bench` writes; built-in cost table)
[cluster]
nodes = 1
gpus-per-node = 2
gpu-memory-gib = 11.77
gpu-fp32-tflops = 0.2
gpu-bf16-tflops = 0.2
gpu-hbm-gbytes-per-s = 80
intra-link = "pcie"
intra-gbytes-per-s = 8
intra-latency-us = 0.25
inter-link = "ethernet"
inter-node-gbytes-per-s = 4
inter-latency-us = 5
""")
model = ["--layers", "4", "--hidden", "32", "--heads", "4", "--seq-len", "16", "--global-batch-size", "8",
         "--micro-batch-size", "2", "--steps", "24", "--eval-every", "0", "--log-every", "1"]
elastic = [trident, "train", "--elastic", "--launcher", MPIRUN, "--ranks-per-node", "2", "--dp", "2", "--tp", "2",
           "--pp", "2", "--checkpoint", "ck", "--checkpoint-every", "10", "--metrics", "m.jsonl", "--report", "r.json",
           "--prediction-cluster", "cluster.toml"] + model

# 1. Kill rank 5 (node 2) after step 12: between the saves of steps 10 and 20.
sup = subprocess.Popen(elastic, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
attempt1 = os.path.join(work, "ck-elastic", "attempt-1-metrics.jsonl")
end = time.time() + 120
while last_step(attempt1) < 12 and time.time() < end and sup.poll() is None:
    time.sleep(0.01)
victims = tagged(rank=5)
for pid in victims:
    os.kill(pid, signal.SIGKILL)
killed_after = last_step(attempt1)
# The checkpoint the restart resumes from (step 10), kept for the reference run.
# Saves go on in the background: the step-10 save is put in place when every rank's writer is done,
# which may be after the kill (by the ranks' stop, or not at all): wait for it, up to 20 s (the
# resumed run's own first save is at step 20, well after that).
end = time.time() + 20
while not os.path.isfile(os.path.join(work, "ck", "manifest.json")) and time.time() < end:
    time.sleep(0.05)
have_ck = os.path.isdir(os.path.join(work, "ck"))
if have_ck:
    shutil.copytree(os.path.join(work, "ck"), os.path.join(work, "ck-at-kill"))
out, _ = sup.communicate(timeout=240)
print(out)
if not have_ck:
    print(f"FAIL no checkpoint was written before the kill; files in {work}")
    sys.exit(1)
check(len(victims) == 1, f"rank 5 found and killed after step {killed_after}")
check(sup.returncode == 0, f"the elastic run finished (exit {sup.returncode})")
nothing_left("after the elastic run")
with open(os.path.join(work, "ck-at-kill", "manifest.json")) as f:
    meta = json.load(f)["meta"]
saved = meta["step"]
check(saved == 10 and meta["sampler"]["next_step"] == 10,
      f"the kill landed between the saves of steps 10 and 20 (checkpoint at the kill: step {saved}, its data "
      f"sampler's next step {meta['sampler']['next_step']})")

m = lines(os.path.join(work, "m.jsonl"))
events = [j for j in m if j.get("event") == "elastic_restart"]
check(len(events) == 1, f"one elastic_restart event in the metrics file ({len(events)})")
ev = events[0] if events else {}
print(json.dumps(ev, indent=1))
check(ev.get("lost_ranks") == [5] and ev.get("lost_nodes") == [2], "the event names rank 5 on node 2")
check(ev.get("checkpoint_step") == 10, "the event's checkpoint holds step 10")
failed = ev.get("failed_after_step", -1)
check(10 < failed < 20 and ev.get("lost_steps") == failed - 10, f"failed after step {failed}: {failed - 10} steps lost")
back = [j for j in m if j.get("event") == "elastic_back"]
check(len(back) == 1 and back[0].get("step") == 11, "one elastic_back line: the resumed run's first step is 11")
ev = dict(ev, **{k: back[0][k] for k in ("restart_s", "time_lost_s") if back and k in back[0]})
check(all(ev.get(k, -1) >= 0 for k in ("lost_work_s", "detection_s", "restart_s", "time_lost_s")) and
      abs(ev["time_lost_s"] - ev["lost_work_s"] - ev["detection_s"] - ev["restart_s"]) < 1e-9,
      "time lost = lost work + detection + restart, each measured")
first_idx = m.index(events[0]) if events else len(m)
before = {j["step"]: j["loss"] for j in m[:first_idx] if "loss" in j}
after = [j for j in m[first_idx:] if "loss" in j]
steps_after = [j["step"] for j in after]
check(steps_after == list(range(11, 25)), f"the resumed run does steps 11..24, none skipped or repeated ({steps_after})")
world = ev.get("dp", 0) * ev.get("tp", 0) * ev.get("pp", 0)
check(0 < world <= 6, f"the new layout (dp {ev.get('dp')} tp {ev.get('tp')} pp {ev.get('pp')}) fits the 6 ranks left")
with open(os.path.join(work, "r.json")) as f:
    reported = json.load(f).get("elastic", [{}])[0]
check(reported.get("lost_ranks") == [5] and reported.get("time_lost_s") == ev.get("time_lost_s"),
      "the report carries the event and its time lost")

# 2. The reference: the same layout, uninterrupted, from the same checkpoint.
ref = subprocess.run(MPIRUN.split() + ["-np", str(world), trident, "train", "--config", "ck-elastic/attempt-2.toml",
                                       "--resume", "ck-at-kill", "--checkpoint", "ref-ck", "--metrics", "ref.jsonl",
                                       "--report", "ref.json"],
                     cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
check(ref.returncode == 0, f"the reference run finished (exit {ref.returncode})" + ("" if ref.returncode == 0 else ref.stdout))
reference = {j["step"]: j["loss"] for j in lines(os.path.join(work, "ref.jsonl"))}
print(" step   uninterrupted   after restart   killed run (8 ranks)")
worst = 0.0
for j in after:
    r = reference.get(j["step"], float("nan"))
    worst = max(worst, abs(r - j["loss"])) if r == r else float("inf")
    b = before.get(j["step"])
    print(f" {j['step']:4d}   {r:13.8f}   {j['loss']:13.8f}   {'' if b is None else f'{b:13.8f}'}")
check(worst <= 1e-5, f"losses after the restart equal the uninterrupted run's (largest difference {worst:.2e})")
# Same samples: the resumed steps the killed run also did have its losses (another layout:
# 1e-4 relative), while two neighbouring steps differ far more (a shifted data position shows).
same = [abs(j["loss"] - before[j["step"]]) / abs(before[j["step"]]) for j in after if j["step"] in before]
shift = abs(before[11] - before[12]) / abs(before[11]) if 11 in before and 12 in before else 0
check(same and max(same) < 1e-4 < shift,
      f"steps 11..{failed} again: the killed run's losses ({max(same or [1]):.1e} relative; one step apart {shift:.1e})")
nothing_left("after the reference run")

# 3. The supervisor itself killed (SIGKILL, no handler runs): its ranks and mpirun go too.
small = [trident, "train", "--elastic", "--launcher", MPIRUN, "--dp", "2", "--checkpoint", "ck2", "--checkpoint-every",
         "10", "--prediction-cluster", "cluster.toml"] + model
sup = subprocess.Popen(small, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
end = time.time() + 120
while last_step(os.path.join(work, "ck2-elastic", "attempt-1-metrics.jsonl")) < 2 and time.time() < end:
    time.sleep(0.05)
check(len(tagged(rank=1)) == 1, "the second run's ranks are running")
sup.kill()
sup.wait()
nothing_left("after a SIGKILL of the supervisor", wait_s=30)

if failures:
    print(f"FAILED: {len(failures)} check(s); files in {work}")
    sys.exit(1)
shutil.rmtree(work, ignore_errors=True)
print("PASS")
