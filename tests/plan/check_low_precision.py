"""--precision mxfp8 and nvfp4 as users run them: planned on Blackwell at their own peaks and bytes
(text and JSON), refused by name on GPUs without block scaling (H100), written to Megatron as its
own flags (checked against data/frameworks/megatron-args.tsv), refused by the torchtitan emitter
and by train.

usage: check_low_precision.py TRIDENT ROOT
"""
import json
import os
import subprocess
import sys

trident, root = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    return subprocess.run([trident, *args], capture_output=True, text=True)


def check(ok, what):
    if not ok:
        failures.append(what)


LAYOUT = ["--model", "llama3-8b", "--seq-len", "2048", "--nodes", "1", "--global-batch-size", "128", "--micro-batch-size", "1",
          "--tp", "1", "--pp", "1", "--dp", "8", "--stack", "megatron-core-te"]

# Megatron's own options: name -> choices (data/frameworks/megatron-args.tsv).
choices = {}
for line in open(os.path.join(root, "data", "frameworks", "megatron-args.tsv")):
    if line.startswith("#") or not line.startswith("--"):
        continue
    cols = line.rstrip("\n").split("\t")
    choices[cols[0]] = cols[2].split(",") if len(cols) > 2 and cols[2] else []

# Planned on B200: the precision in text and JSON, the GEMMs at the FP4 peak (fp8: FP8's), the bytes.
steps = {}
for precision in ("fp8", "mxfp8", "nvfp4"):
    p = run("lint", "--json", "--cluster", "dgx-b200", "--precision", precision, *LAYOUT)
    check(p.returncode == 0, f"lint --precision {precision} on dgx-b200 exits {p.returncode}: {p.stderr[:300]}")
    if p.returncode == 0:
        j = json.loads(p.stdout)
        check(json.dumps(j).count(f'"{precision}"') > 0, f"lint --json does not name precision {precision}")
        steps[precision] = j["step_time_s"] if "step_time_s" in j else 1 / j["tokens_per_s"]
    t = run("lint", "--cluster", "dgx-b200", "--precision", precision, *LAYOUT)
    check(precision in t.stdout, f"lint's text does not name precision {precision}")
if len(steps) == 3:
    check(steps["nvfp4"] < steps["fp8"], f"nvfp4 step {steps['nvfp4']} is not shorter than fp8's {steps['fp8']}")

# GPUs without block scaling refuse mxfp8 and nvfp4 by name, with the fix; fp8 still plans there.
for precision in ("mxfp8", "nvfp4"):
    p = run("lint", "--cluster", "dgx-h100", "--precision", precision, *LAYOUT)
    check(p.returncode == 2, f"--precision {precision} on H100 exits {p.returncode}, not 2")
    check(f"--precision {precision}" in p.stderr and "H100" in p.stderr and "b200-180g" in p.stderr,
          f"--precision {precision} on H100: the refusal does not name the precision, the GPU and the fix: {p.stderr[:400]}")
    check(f"{precision}-unsupported" in p.stderr or "--precision fp8" in p.stderr,
          f"--precision {precision} on H100: no fix offered: {p.stderr[:400]}")
check(run("lint", "--cluster", "dgx-h100", "--precision", "fp8", *LAYOUT).returncode == 0, "fp8 on H100 no longer plans")

# --emit megatron writes Megatron's flags for each, every one an option of Megatron with a valid value.
expect = {"fp8": ["--fp8-format hybrid"], "mxfp8": ["--fp8-format e4m3", "--fp8-recipe mxfp8"],
          "nvfp4": ["--fp4-format e2m1", "--fp4-recipe nvfp4"]}
for precision, flags in expect.items():
    p = run("plan", "--cluster", "dgx-b200", "--precision", precision, "--emit", "megatron", *LAYOUT)
    check(p.returncode == 0, f"--emit megatron with {precision} exits {p.returncode}: {p.stderr[:300]}")
    words = p.stdout.split()
    pairs = [f"{a} {b}" for a, b in zip(words, words[1:])]
    for f in flags:
        check(f in pairs, f"--emit megatron with {precision} lacks '{f}'")
        name, value = f.split()
        check(name in choices and (not choices[name] or value in choices[name]),
              f"'{f}' is not a Megatron option with that value (megatron-args.tsv)")
    check("--bf16" in words, f"--emit megatron with {precision} lacks --bf16")
    others = [f for q, fl in expect.items() if q != precision for f in fl if f not in flags]
    check(not [f for f in others if f in pairs], f"--emit megatron with {precision} writes another precision's flags")

# torchtitan has no block-scaled format: refused by name; train refuses them too.
for precision in ("mxfp8", "nvfp4"):
    for emit in ("torchtitan", "torchtitan-toml"):
        p = run("plan", "--cluster", "dgx-b200", "--precision", precision, "--emit", emit, *LAYOUT, "--zero", "3")
        check(p.returncode == 2 and f"precision {precision}" in p.stderr and "block scaling" in p.stderr,
              f"--emit {emit} with {precision} is not refused by name (exit {p.returncode}): {p.stderr[:300]}")
    p = run("train", "--model", "llama3-8b", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "16",
            "--vocab", "128", "--global-batch-size", "2", "--steps", "1", "--precision", precision)
    check(p.returncode == 2 and f"{precision} training" in p.stderr,
          f"train --precision {precision} is not refused by name (exit {p.returncode}): {p.stderr[:300]}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("low precision: planned, refused and emitted as expected")
