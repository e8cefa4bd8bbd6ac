#!/usr/bin/env python3
"""plan (every dimension fixed), lint and simulate of one config give the same step time and memory.

usage: check_same_numbers.py TRIDENT CONFIG [FLAG ...]   (extra flags go to all three commands)
"""
import json
import subprocess
import sys

trident, config, extra = sys.argv[1], sys.argv[2], sys.argv[3:]


def run(*args):
    out = subprocess.run([trident, *args, "--config", config, *extra, "--json"], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


lint = run("lint")
plan = run("plan", "--top", "1")["candidates"][0]
sim = run("simulate")
steps = {"lint": lint["time_s"]["step"], "plan": plan["time_s"]["step"], "simulate (planner)": sim["planner_step_s"]}
mems = {"lint": lint["memory_gib"]["total"], "plan": plan["memory_gib"]["total"], "simulate": sim["memory"]["total_gib"]}
print("step", steps, "memory GiB", mems)
assert plan["layout"] == lint["layout"], (plan["layout"], lint["layout"])
assert max(steps.values()) - min(steps.values()) < 1e-5 * max(steps.values()), steps
assert max(mems.values()) - min(mems.values()) < 2e-3, mems
assert sim["memory"]["fits"] == lint["fits"], (sim["memory"], lint["fits"])
