#!/usr/bin/env python3
"""The NeMo GPT-3 175B recipe on 128 H100s fits and reproduces its published step within 5%.

A calibration check: the H100 cost table was fitted to this row (data/calibration/, column
`fitted`), so it shows the fit holds, not that the model predicts an unseen run.

usage: check_nemo_recipe.py TRIDENT CONFIG PUBLISHED_S [FLAG ...]
"""
import json
import subprocess
import sys

trident, config, published, extra = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
out = subprocess.run([trident, "lint", "--config", config, *extra, "--json"], capture_output=True, text=True)
assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr)
j = json.loads(out.stdout)
step = j["time_s"]["step"]
print(f"fits {j['fits']} at {j['memory_gib']['total']} GiB, step {step:.3f} s vs published {published} s "
      f"({100 * (step / published - 1):+.2f}%)")
assert j["fits"], j["memory_gib"]
assert abs(step / published - 1) < 0.05, step
