#!/usr/bin/env python3
"""A NeMo recipe (GPT-3 175B on 128 H100s, Llama 3.1 405B on 512 GB200) fits and gives its published step within 5%.

On a row the GPU's cost table was fitted to (data/calibration/, column `fitted` 1: the H100
rows, GB200's BF16 row) it is a calibration check, showing the fit holds; on a held-out row
(GB200's FP8 row) it tests a prediction.

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
