"""trident train's answers to what a new user trips over: OMP_NUM_THREADS is --threads' default;
OpenMP waits passively when a rank's threads exceed its cores (taskset to one core); --stop-at
without --checkpoint warns that nothing is left to resume; MFU stays at or below 100%, names its
convention, gives both figures, and the summary is the median step's."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
tmp = tempfile.mkdtemp()


small = ["train", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--steps", "6",
         "--log-every", "1"]


def run(args, env_extra, prefix=()):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra)
    p = subprocess.run([*prefix, trident, *args], capture_output=True, text=True, env=env, timeout=240)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p


metrics = os.path.join(tmp, "m.jsonl")
p = run(small + ["--stop-at", "4", "--metrics", metrics], {"OMP_NUM_THREADS": "1"})
threads = re.search(r"^  threads\s+(.*)$", p.stdout, re.M)
check("OMP_NUM_THREADS=1 sets the threads", threads and threads.group(1).startswith("1 per rank (OMP_NUM_THREADS)"),
      threads and threads.group(1))
check("--stop-at without --checkpoint warns: nothing to resume",
      "warning: --stop-at 4" in p.stderr and "nothing is saved to resume from" in p.stderr, p.stderr)
lines = [json.loads(x) for x in open(metrics)]
check("every step's MFU is at most 100% and above 0", lines and all(0 < x["mfu"] <= 1 for x in lines),
      [x["mfu"] for x in lines])
check("every step gives the causal-halved MFU too, below the full one",
      all(0 < x["mfu_causal_halved"] < x["mfu"] for x in lines), lines[:2])
shown = [float(m) for m in re.findall(r"\| MFU\s+([\d.]+)% \|", p.stdout)]
check("progress lines: MFU at most 100%", shown and max(shown) <= 100, shown)
done = re.search(r"^done: .*$", p.stdout, re.M)
done = done.group(0) if done else ""
check("summary: both MFU figures and the convention",
      "attention counted in full" in done and "with causal attention halved" in done, done)
median = re.search(r"median of the (\d+) steps after the first, ([\d.]+) s", done)
steps = [x["step_s"] for x in lines[1:]]
check("summary: the median of the steps after the first", median and int(median.group(1)) == len(steps)
      and abs(float(median.group(2)) - statistics.median(steps)) < 1e-3, (done, steps))
tokens = re.search(r"; (\d+) tokens/s", done)
per_step = lines[0]["tokens_per_s"] * lines[0]["step_s"]
check("summary tokens/s is the median step's", tokens and median and
      abs(int(tokens.group(1)) - per_step / float(median.group(2))) <= 0.01 * int(tokens.group(1)) + 1, (done, per_step))

ckpt = os.path.join(tmp, "ckpt")
p = run(small + ["--stop-at", "4", "--checkpoint", ckpt], {"OMP_NUM_THREADS": "1"})
check("--stop-at with --checkpoint: no warning", "warning: --stop-at" not in p.stderr, p.stderr)

taskset = shutil.which("taskset")
if taskset:
    p = run(small, {"OMP_NUM_THREADS": "2"}, (taskset, "-c", "0"))
    check("2 threads on 1 core: OpenMP waits passively, and says why",
          re.search(r"OpenMP wait policy passive \(OMP_WAIT_POLICY=passive, set by trident: 1 rank x 2 threads.* > 1 core\)",
                    p.stdout), p.stdout[:2500])
    p = run(small, {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "active"}, (taskset, "-c", "0"))
    check("the user's OMP_WAIT_POLICY stands", "OpenMP wait policy active (OMP_WAIT_POLICY=active, from the environment)"
          in p.stdout, p.stdout[:2500])
else:
    check("taskset is installed (util-linux)", False)

shutil.rmtree(tmp, ignore_errors=True)
finish()
