"""`trident bench` writes what it measured, and the planner's prediction is made of it.

No speed is asserted here (the suite runs on loaded machines): the figures bench measures vary
with the machine's load, what must not vary is what it does with them.

1. `trident bench` (one process, one thread) writes a [cluster] table (peaks: FMA chains in
   registers or sgemm's best rate where higher, so no sgemm share is above 1; memcpy) and a
   [cost] table (shares of those peaks). Every figure of the file is
   the arithmetic of the measured times its comments print: each sgemm size's GFLOP/s and share
   of the peak, the fitted curve E (n / (n + H))^3 at each size, the [cluster] peaks, and the
   memory-bound kernels' share (their bytes over their time, so between the slowest and the
   fastest kernel's share of the memcpy rate). It records the machine's load while it measured
   (measured_under_load, cpu_share: its share of the core).
2. `trident simulate --config CLUSTER --cost FILE` names the file and predicts with its values
   (each [cost] key of the file is the one the prediction used), and the prediction follows
   them: the built-in table predicts another step, a halved GEMM or memory share a longer one.
How close that prediction comes to a measured training step is a speed: `make bench` prints it
(bench/cost/run.sh).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

trident, source = sys.argv[1], sys.argv[2]
env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
MODEL = ["--layers", "2", "--hidden", "128", "--heads", "4", "--seq-len", "64", "--vocab", "256",
         "--global-batch-size", "4", "--micro-batch-size", "4"]
LAYOUT = ["--tp", "1", "--pp", "1", "--dp", "1", "--gpus-per-node", "1", "--precision", "fp32", "--json"]
failures = []


def run(*args):
    r = subprocess.run([trident, *args], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        sys.exit(f"trident {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def near(a, b, rel, absolute=0.0):
    return abs(a - b) <= rel * abs(b) + absolute


def keys(section):
    return {k: float(v) for k, v in re.findall(r"^([\w-]+) = ([0-9.e+-]+)$", section, re.M)}


def one(pattern, text):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit(f"the bench file lacks /{pattern}/:\n{text}")
    return m


with tempfile.TemporaryDirectory() as tmp:
    bench = os.path.join(tmp, "bench.toml")
    run("bench", "--out", bench)
    text = open(bench).read()
    check("\n[cluster]\n" in text and "\n[cost]\n" in text, "the file has a [cluster] and a [cost] table")
    head, cost_text = text.split("\n[cost]\n")
    cluster_keys, cost = keys(head.split("[cluster]\n")[1]), keys(cost_text)
    for key in ("gemm_peak_efficiency", "gemm_half_dim", "kernel_launch_us", "hbm_efficiency"):
        check(key in cost and math.isfinite(cost[key]) and cost[key] > 0, f"[cost] {key} = {cost.get(key)} is positive")
    for key in ("gpu-fp32-tflops", "gpu-hbm-gbytes-per-s", "intra-gbytes-per-s"):
        check(key in cluster_keys and cluster_keys[key] > 0, f"[cluster] {key} = {cluster_keys.get(key)} is positive")

    # The peaks of [cluster] are the ones the comments print.
    # The FLOP peak: the FMA chains' rate, or sgemm's best where that is higher.
    # Where the fitted curve's E (or the kernels' memory share) came out above 1, the peak is
    # raised to it and the file says so: the shares below are then of the raised peak.
    # The FMA peak names its loop: the widest FMA this CPU's cpuid flags allow (the probe that read
    # 42.7 GFLOP/s where AVX-512 FMAs reach 111 named none), chains that cover the FMA latency.
    m = one(r"FMA chains in registers ([0-9.]+) GFLOP/s per core \((AVX-512|AVX2|SSE) (FMA|multiply \+ add), "
            r"(\d+) chains of (\d+) floats\)(?:, sgemm's best ([0-9.]+) GFLOP/s \([^)]*\))?"
            r"(?:, raised to ([0-9.]+) GFLOP/s)?", text)
    fma_gflops = float(m.group(1))
    peak_gflops = float(m.group(7) or m.group(6) or m.group(1))
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    widest = ("AVX-512", 16) if "avx512f" in flags else ("AVX2", 8) if "avx2" in flags and "fma" in flags else ("SSE", 4)
    check((m.group(2), int(m.group(5))) == widest,
          f"the FMA peak runs {m.group(2)} ({m.group(5)} floats), the widest of this CPU's flags: {widest}")
    check(int(m.group(4)) >= 8, f"{m.group(4)} chains cover 4 cycles of FMA latency on 2 FMA units")
    check(peak_gflops >= fma_gflops, f"the peak {peak_gflops} GFLOP/s is at least the FMA chains' {fma_gflops}")
    m = one(r"MiB memcpy ([0-9.]+) GB/s(?:, raised to ([0-9.]+) GB/s)?", text)
    copy_gbs = float(m.group(2) or m.group(1))
    check(near(cluster_keys["gpu-fp32-tflops"] * 1e3, peak_gflops, 1e-3, 0.006),
          f"gpu-fp32-tflops {cluster_keys['gpu-fp32-tflops']} = the peak {peak_gflops} GFLOP/s")
    check(near(cluster_keys["gpu-hbm-gbytes-per-s"], copy_gbs, 1e-3, 0.006),
          f"gpu-hbm-gbytes-per-s {cluster_keys['gpu-hbm-gbytes-per-s']} = the memcpy {copy_gbs} GB/s")

    # Each sgemm size: its rate is 2 n^3 over its time, its share that rate (the call cost taken
    # out of the time) over the FMA peak, and the curve column the written E and H.
    peak = cluster_keys["gpu-fp32-tflops"] * 1e12
    call_s = cost["kernel_launch_us"] * 1e-6
    E, H = cost["gemm_peak_efficiency"], cost["gemm_half_dim"]
    sizes = re.findall(r"sgemm +(\d+)\^3: +([0-9.]+) us, +([0-9.]+) GFLOP/s = ([0-9.]+) of the peak "
                       r"\(the curve: ([0-9.]+)\)", text)
    check(len(sizes) >= 4, f"bench measured {len(sizes)} sgemm sizes (at least 4)")
    for n, us, gflops, share, curve in sizes:
        n, gflops, share, curve = int(n), float(gflops), float(share), float(curve)
        flops = 2.0 * n ** 3
        t = flops / (gflops * 1e9)  # the rate has more digits than the time of a small size
        check(near(float(us) * 1e-6, t, 1e-3, 0.051e-6), f"sgemm {n}^3: {us} us = 2 n^3 / {gflops} GFLOP/s")
        want = flops / max(t - call_s, t / 2) / peak
        check(near(share, want, 5e-3, 0.0015), f"sgemm {n}^3: share {share} = {want:.4f} (rate without the call, at most half the time, over the peak)")
        check(0 < share <= 1.0005, f"sgemm {n}^3: share {share} is at most 1 (no kernel outruns the peak)")
        want = E * (n / (n + H)) ** 3
        check(near(curve, want, 2e-3, 0.0015), f"sgemm {n}^3: curve {curve} = E (n / (n + H))^3 = {want:.4f}")

    # The memory-bound kernels together: bytes over time, a mean of their rates.
    m = one(r"hbm_efficiency: .*\((.*)\): together ([0-9.]+) of the memcpy rate", text)
    rates = [float(r) for r in re.findall(r"\w+ ([0-9.]+) GB/s", m.group(1))]
    check(len(rates) >= 3, f"bench measured {len(rates)} memory-bound kernels (add, GELU, layer norm)")
    lo, hi = min(rates) / copy_gbs, max(rates) / copy_gbs
    hbm = cost["hbm_efficiency"]
    check(near(float(m.group(2)), hbm, 0, 0.0006), f"the comment's share {m.group(2)} is hbm_efficiency {hbm}")
    check(lo * (1 - 3e-3) - 0.006 / copy_gbs <= hbm <= hi * (1 + 3e-3) + 0.006 / copy_gbs,
          f"hbm_efficiency {hbm} lies between the kernels' shares {lo:.4f} .. {hi:.4f}")

    # The optimizer pass: its time per parameter x the written memory peak x hbm_efficiency is the
    # bytes per parameter the planner divides by that rate again.
    m = one(r"optimizer_bytes_per_param: .* over 1 Mi floats, ([0-9.]+) us = ([0-9.]+) ns per parameter; "
            r"x ([0-9.]+) GB/s x ([0-9.]+) = ([0-9.]+) B per parameter", text)
    us, ns, gbs, share, bpp = (float(m.group(i)) for i in range(1, 6))
    check(near(us * 1e3 / (1 << 20), ns, 2e-2, 0.006), f"optimizer: {us} us over 2^20 parameters = {ns} ns each")
    check(near(gbs, cluster_keys["gpu-hbm-gbytes-per-s"], 1e-3, 0.006) and near(share, hbm, 0, 0.0006),
          f"optimizer: the rate {gbs} GB/s x {share} is the written peak and hbm_efficiency")
    check(near(ns * gbs * share, bpp, 2e-2, 0.06) and near(cost.get("optimizer_bytes_per_param", 0), bpp, 2e-3, 0.06),
          f"optimizer: {ns} ns x {gbs} GB/s x {share} = {bpp} B per parameter = [cost] optimizer_bytes_per_param "
          f"{cost.get('optimizer_bytes_per_param')}")
    check(bpp > 0, f"optimizer: {bpp} B per parameter is positive")

    # A Llama model's memory-bound kernels: add, SwiGLU and RMS norm, measured with --family llama.
    llama_bench = os.path.join(tmp, "bench-llama.toml")
    run("bench", "--family", "llama", "--out", llama_bench)
    llama_text = open(llama_bench).read()
    m = one(r"hbm_efficiency: .*\((add [0-9.]+ GB/s, swiglu [0-9.]+ GB/s, rmsnorm [0-9.]+ GB/s)\): together ([0-9.]+)",
            llama_text)
    check(float(m.group(2)) > 0, f"--family llama measures {m.group(1)}: together {m.group(2)}")
    bad = subprocess.run([trident, "bench", "--family", "mixtral", "--out", os.path.join(tmp, "x.toml")],
                         capture_output=True, text=True, env=env)
    check(bad.returncode == 2 and "--family 'mixtral' is not gpt or llama" in bad.stderr,
          f"--family mixtral is refused naming it (exit {bad.returncode}: {bad.stderr.strip()})")
    # The all-to-all's step sequence: both values refused outside their range, together.
    bad = subprocess.run([trident, "bench", "--alltoall-step-calls", "0", "--alltoall-first-working-set-mib", "2000",
                          "--out", os.path.join(tmp, "x.toml")], capture_output=True, text=True, env=env)
    check(bad.returncode == 2 and "--alltoall-step-calls 0 is outside 1 .. 4096" in bad.stderr and
          "--alltoall-first-working-set-mib 2000 is outside 0 .. 1024" in bad.stderr,
          f"a step of 0 calls and a 2000 MiB first working set are refused (exit {bad.returncode}: {bad.stderr.strip()})")

    # The machine's load during the measurement is recorded (as comments the readers skip), and
    # a share of the core below 0.90 is called load.
    m = one(r"^# measured_under_load = (true|false)\n# cpu_share = ([0-9.]+)\n# other_cores_busy = ([0-9.]+)$", text)
    under, share, others = m.group(1) == "true", float(m.group(2)), float(m.group(3))
    check(0 <= share <= 1 and others >= 0, f"cpu_share {share} is a share, other_cores_busy {others} a count")
    check(under or share >= 0.9, f"measured_under_load = {m.group(1)} with cpu_share {share}")
    print(f"bench's load: measured_under_load {m.group(1)}, cpu_share {share}, other cores busy {others}")

    # The prediction is made of the file.
    cluster = os.path.join(tmp, "cluster.toml")
    open(cluster, "w").write(head + "\n")
    sim = json.loads(run("simulate", "--config", cluster, "--cost", bench, *MODEL, *LAYOUT))
    used = sim["cost_table"]
    check("bench.toml" in used["source"], f"simulate names the cost file it used: {used['source']}")
    for key, value in cost.items():
        check(key in used and near(used[key], value, 1e-12), f"the prediction used {key} = {used.get(key)} (file: {value})")
    predicted = sim["planner_step_s"]
    builtin = json.loads(run("simulate", "--config", cluster, *MODEL, *LAYOUT))
    check(builtin["cost_table"]["source"] == "built-in" or "bench.toml" not in builtin["cost_table"]["source"],
          f"without --cost the built-in table applies: {builtin['cost_table']['source']}")
    check(predicted > 0 and builtin["planner_step_s"] != predicted,
          f"the measured table predicts {predicted * 1e3:.3f} ms, the built-in one {builtin['planner_step_s'] * 1e3:.3f} ms")
    for key in ("gemm_peak_efficiency", "hbm_efficiency"):
        halved = os.path.join(tmp, f"halved-{key}.toml")
        open(halved, "w").write(re.sub(rf"^{key} = .*$", f"{key} = {cost[key] / 2:.6f}", text, flags=re.M))
        slower = json.loads(run("simulate", "--config", cluster, "--cost", halved, *MODEL, *LAYOUT))["planner_step_s"]
        check(slower > predicted, f"{key} halved: the step predicted {slower * 1e3:.3f} ms > {predicted * 1e3:.3f} ms")

if failures:
    sys.exit(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
print("PASS")
