#!/usr/bin/env python3
"""`trident rehearse` end to end on two emulated hosts with shaped links.

From the GPT-3 175B plan `trident plan --emit` writes: a 4-rank rehearsal on 2 network
namespaces (tc tbf on every veth end), then checks the derivation table, the links text, the
verdict (text and JSON, its holds flags recomputed from its own numbers), the self-calibration
(each fitted value recomputed from its printed inputs, the [cost] file it writes read back by
tomllib and by `trident plan --cost`), the placement probe's figures in the prediction's
cluster (recomputed from its file) and the plan made again, and that no namespace,
link or qdisc of the run is left. Then a run interrupted by SIGINT while it measures, and one
stopped by SIGTERM while it trains, must clean up too (exit 128 + signal).

Exit 77 (skipped) when not root or when `ip netns` is unavailable here.
usage: rehearse_hosts_test.py TRIDENT REPO_ROOT
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def leftovers(prefix):
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    found = [line for line in (ns + links + qdiscs).splitlines() if re.search(r"\b" + prefix + r"[-bvp]", line)]
    return found


def prefix_of(text):
    m = re.search(r"network namespaces (tr[0-9]+)-h0", text)
    return m.group(1) if m else None


def check_verdict(out, folder):
    with open(os.path.join(folder, "verdict.json")) as f:
        v = json.load(f)
    keys = [t["key"] for t in v["terms"]]
    # The verdict lists every top-level term of core/step_terms (host: a Python stack's issue floor, 0 in
    # Trident's own runtime), then other and the step.
    if keys != ["compute", "tp", "cp", "ep", "ep_wait", "host", "pp", "bubble", "dp", "optimizer", "other", "step"]:
        fail("verdict terms: %s" % keys)
    pred_step = v["terms"][-1]["predicted_s"]
    if not pred_step or pred_step <= 0:
        fail("no predicted step: %s" % v["terms"][-1])
    misses = []
    for t in v["terms"]:
        lo, med, hi = t["measured_low_s"], t["measured_median_s"], t["measured_high_s"]
        if not (lo <= med <= hi):
            fail("median outside its spread: %s" % t)
        if t["predicted_s"] is None:
            continue
        if t["note"] is not None and t["note"].startswith("not exercised"):
            if t["holds"] is not None:  # a dimension at 1 is not judged
                fail("term %s not exercised but judged: %s" % (t["key"], t))
            continue
        diff = abs(med - t["predicted_s"])
        holds = diff <= v["tolerance"] * t["predicted_s"] or diff <= 0.05 * pred_step
        if holds != t["holds"]:
            fail("term %s: holds %s, but its numbers say %s" % (t["key"], t["holds"], holds))
        if not holds:
            misses.append(t["label"])
    if v["holds"] != (not misses):
        fail("verdict holds=%s with misses %s" % (v["holds"], misses))
    sentence = v["sentence"]
    if v["holds"]:
        if not sentence.startswith("The prediction holds"):
            fail("sentence: " + sentence)
    else:
        if not sentence.startswith("The prediction does not hold"):
            fail("sentence: " + sentence)
        for label in misses:
            if label not in sentence:
                fail("miss %s not named in: %s" % (label, sentence))
    if sentence not in out:
        fail("the verdict sentence is not in the text output")
    if not v.get("full_scale") or "For the full-scale plan: " + v["full_scale"] not in out:
        fail("no sentence on the full-scale plan in verdict.json and the text: %s" % v.get("full_scale"))
    links = v["links"]
    if links["hosts"] != 2 or links["ranks_per_host"] != 2 or links["latency_shaped"] is not False:
        fail("links: %s" % links)
    if not (links["shaped_Bps"] > 0 and links["measured_Bps"] > 0):
        fail("links not shaped or measured: %s" % links)
    for key in ("load_start", "load_end"):
        if v[key] is None or v[key]["wall_s"] <= 0:
            fail("no %s: %s" % (key, v[key]))
    check_placement(links, folder)
    return v


def check_placement(links, folder):
    """The prediction's cluster takes each rank's compute share and both latencies from the
    placement probe's file, by the arithmetic the links text prints."""
    with open(links["placement_probe"]) as f:
        probe = json.load(f)
    if (probe["ranks"], probe["hosts"], probe["ranks_per_host"]) != (4, 2, 2):
        fail("placement probe did not run as the rehearsal places its ranks: %s" % probe)
    if not (probe["intra"]["measured"] and probe["inter"]["measured"]):
        fail("placement probe measured no link of a kind: %s" % probe)
    compute = (probe["intra"]["compute_s"] + probe["inter"]["compute_s"]) / 2
    if not close(links["compute_share"], min(1.0, probe["alone_cpu_s"] / compute)):
        fail("compute share %s is not the chunk alone / its mean in the probe: %s" % (links["compute_share"], probe))
    bps = {"intra": links["shared_memory_Bps_per_rank"] * links["shared_memory_efficiency"],
           "inter": links["measured_Bps"] / links["ranks_per_host"] * links["network_efficiency"]}
    with open(os.path.join(folder, "prediction-cluster.toml"), "rb") as f:
        cluster = tomllib.load(f)["cluster"]
    with open(links["machine"], "rb") as f:
        machine = tomllib.load(f)["cluster"]
    for kind in ("intra", "inter"):
        wire = probe["message_bytes"] / bps[kind]
        want = max(0.0, probe[kind]["exchange_s"] - wire) * 1e6
        if not (close(links[kind + "_wire_us"], wire * 1e6) and close(links[kind + "_latency_us"], want)):
            fail("%s latency %s us is not the exchange less the wire (%s us): %s" % (kind, links[kind + "_latency_us"], want, probe))
        if abs(cluster[kind + "-latency-us"] - want) > 0.0005 + 1e-9 * want:
            fail("prediction cluster %s-latency-us %s, the probe gives %s" % (kind, cluster[kind + "-latency-us"], want))
    if abs(cluster["gpu-fp32-tflops"] - machine["gpu-fp32-tflops"] * links["compute_share"]) > 5e-7:
        fail("prediction cluster compute %s is not the machine's %s x the share %s" %
             (cluster["gpu-fp32-tflops"], machine["gpu-fp32-tflops"], links["compute_share"]))


def check_tp_across(v, out):
    across = v["tp_across"]
    if not re.search(r"\bdp-pp-tp\b|\bpp-dp-tp\b", across["order"]):
        fail("TP-across order: %s" % across["order"])
    rows = {r["label"]: r for r in across["comparison"]["rows"]}
    step = rows["step (slowest rank)"]
    for r in rows.values():
        if abs(r["measured_factor"] - r["across_s"] / r["inside_s"]) > 1e-9 * r["measured_factor"]:
            fail("measured factor is not across / inside: %s" % r)
        if abs(r["predicted_factor"] - r["predicted_across_s"] / r["predicted_inside_s"]) > 1e-9 * r["predicted_factor"]:
            fail("predicted factor is not across / inside: %s" % r)
    # The planner must see the crossing: TP predicted slower across slow links than inside a host.
    if not rows["TP collectives"]["predicted_factor"] > 1:
        fail("TP across hosts is not predicted slower: %s" % rows["TP collectives"])
    holds = abs(step["measured_factor"] / step["predicted_factor"] - 1) <= across["comparison"]["tolerance"]
    if holds != across["comparison"]["holds"]:
        fail("comparison holds=%s, its numbers say %s" % (across["comparison"]["holds"], holds))
    if across["comparison"]["sentence"] not in out or "TP inside the hosts (order tp-dp-pp) against TP across" not in out:
        fail("comparison missing from the text")


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def check_calibration(v, out, folder, trident, plan, env):
    """The fitted values follow from their printed inputs, the [cost] file holds them and the
    planner reads it, each layout's errors follow from its measured and predicted terms, and the
    plan made again applies the printed link ratios. Structure and consistency only: no timing."""
    cal = v["calibration"]
    fit = cal["fit"]
    medians = {t["key"]: t["measured_median_s"] for t in v["terms"]}
    fields = [s["field"] for s in fit["steps"]]
    # Each link is fitted by its share or, where its terms are latency-bound, by its latency.
    for choices in (("hbm_efficiency",), ("gemm_peak_efficiency",), ("pcie_efficiency", "intra-latency-us"),
                    ("network_efficiency", "inter-latency-us")):
        if not any(c in fields for c in choices):
            fail("no fit step for %s: %s" % (" or ".join(choices), fields))
    for s in fit["steps"]:
        if not close(s["measured_s"], sum(medians[k] for k in s["terms"])):
            fail("M of %s is not the sum of its terms' medians: %s" % (s["field"], s))
        if not close(s["predicted_s"], s["scaling_s"] + s["fixed_s"]):
            fail("P != S + F for %s: %s" % (s["field"], s))
        if s["fitted"] and s["latency"]:
            want = s["before"] * (s["measured_s"] - s["fixed_s"]) / s["scaling_s"]
            if not close(s["after"], want):
                fail("%s: after %s, but before x (M - F) / S = %s" % (s["field"], s["after"], want))
        elif s["fitted"]:
            want = s["before"] * s["scaling_s"] / (s["measured_s"] - s["fixed_s"])
            clamped = s["note"] is not None and "clamped" in s["note"]
            if not (close(s["after"], want) or (clamped and s["after"] == 1.0 and want > 1)):
                fail("%s: after %s, but before x S / (M - F) = %s" % (s["field"], s["after"], want))
        elif s["after"] != s["before"] or not s["note"]:
            fail("unfitted %s changed or gave no reason: %s" % (s["field"], s))
        if s["latency"]:
            if s["fitted"] and not close(fit["cluster_after"].get(s["field"], -1), s["after"]):
                fail("cluster_after lacks the fitted %s: %s" % (s["field"], fit["cluster_after"]))
        elif fit["after"][s["field"]] != s["after"]:
            fail("table after lacks the fitted %s" % s["field"])
    if fit["cluster_after"]:
        with open(cal["cluster_file"], "rb") as f:
            fitted_cluster = tomllib.load(f)["cluster"]
        for key, us in fit["cluster_after"].items():
            if abs(fitted_cluster[key] - us) > 0.0005 + 1e-9 * us:
                fail("the fitted cluster file %s has %s = %s, the fit %s" % (cal["cluster_file"], key, fitted_cluster[key], us))
    elif cal["cluster_file"] is not None:
        fail("a fitted cluster file with no latency fitted: %s" % cal["cluster_file"])
    with open(cal["cost_file"], "rb") as f:
        written = tomllib.load(f)["cost"]
    if written != fit["after"]:
        fail("the [cost] file %s differs from the fitted table:\n%s\n%s" % (cal["cost_file"], written, fit["after"]))
    r = subprocess.run([trident, "plan", "--config", plan, "--cost", cal["cost_file"]], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0 or cal["cost_file"] not in r.stdout:
        fail("plan does not read the fitted cost file (exit %d):\n%s" % (r.returncode, (r.stdout + r.stderr)[-2000:]))
    layouts = cal["layouts"]
    if [l["in_sample"] for l in layouts] != [True, False]:
        fail("layouts: %s" % [(l["label"], l["in_sample"]) for l in layouts])
    verdicts = [v["terms"], v["tp_across"]["verdict"]["terms"]]
    for layout, terms in zip(layouts, verdicts):
        med = {t["key"]: t for t in terms}
        for t in layout["terms"]:
            if not close(t["measured_s"], med[t["key"]]["measured_median_s"]):
                fail("%s: measured %s is not the verdict's median" % (layout["label"], t))
            if t["measured_s"] > 0 and not (close(t["error_before"], t["predicted_before_s"] / t["measured_s"] - 1)
                                            and close(t["error_after"], t["predicted_after_s"] / t["measured_s"] - 1)):
                fail("%s: errors not predicted / measured - 1: %s" % (layout["label"], t))
        step = [t for t in layout["terms"] if t["key"] == "step"]
        if not step or not close(step[0]["predicted_before_s"], med["step"]["predicted_s"], 1e-6):
            fail("%s: the step predicted before the fit is not the verdict's: %s" % (layout["label"], step))
    for k in cal["link_checks"]:
        if k["terms"]:
            closer = abs(k["predicted_after_s"] - k["measured_s"]) < abs(k["predicted_before_s"] - k["measured_s"])
            if closer != k["improves"]:
                fail("link check improves=%s, its numbers say %s: %s" % (k["improves"], closer, k))
        if k["text"] not in out:
            fail("link check missing from the text: %s" % k["text"])
    back = v["back_to_the_plan"]
    checks = {k["field"]: k for k in cal["link_checks"]}
    for t in back["transfers"]:
        k = checks.get(t["rehearsal_field"])
        if t["applied"] != bool(k and k["improves"]):
            fail("transfer applied=%s, but its out-of-sample check is %s" % (t["applied"], k))
        if not close(t["ratio"], t["rehearsal_after"] / t["rehearsal_before"]):
            fail("transfer ratio: %s" % t)
        want = min(1.0, t["plan_before"] * t["ratio"]) if t["applied"] else t["plan_before"]
        if not close(t["plan_after"], want):
            fail("transfer: plan after %s, want %s: %s" % (t["plan_after"], want, t))
    for key in ("plan_before", "plan_after", "best_before", "best_after"):
        if back[key] is None or back[key]["step_s"] <= 0:
            fail("back to the plan: no %s" % key)
    if back["plan_before"]["peak_memory_bytes"] != back["plan_after"]["peak_memory_bytes"]:
        fail("the cost table moved the plan's memory: %s" % back)
    if back["changed"] != (back["best_before"]["layout"] != back["best_after"]["layout"]):
        fail("changed=%s but layouts %s / %s" % (back["changed"], back["best_before"]["layout"], back["best_after"]["layout"]))
    for pattern in [r"\nSelf-calibration: the cost table fitted to this rehearsal", r"\n  gemm_peak_efficiency +compute ",
                    r"\nPrediction error \(predicted / measured - 1\), before and after the fit",
                    r"\(fitted on\)\n", r"\(out of sample: not fitted on\)\n", r"\nBack to the plan: ",
                    r"\n  recommended before: ", r"\n  recommended after:  ", r"\n    after:  step [0-9.]+ s"]:
        if not re.search(pattern, out):
            fail("missing /%s/ in:\n%s" % (pattern, out[-6000:]))
    if back["sentence"] not in out:
        fail("the back-to-the-plan sentence is not in the text output")
    print("ok: self-calibration consistent with its inputs, %s read back, plan remade (%s)" %
          (cal["cost_file"], "layout changes" if back["changed"] else "layout stays"))


def run_interrupted(cmd, env, wait_for, sig, folder):
    """Starts cmd, sends sig once wait_for is printed; returns (exit code, output)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = ""
    deadline = time.time() + 240
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        out += line
        if wait_for in line:
            time.sleep(1.0)
            p.send_signal(sig)
            break
    rest, _ = p.communicate(timeout=240)
    return p.returncode, out + rest


def main():
    trident, repo = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("SKIP: emulated hosts need root")
        return SKIP
    if shutil.which("ip") is None or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print("SKIP: `ip netns` is unavailable here")
        return SKIP
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    tmp = tempfile.mkdtemp(prefix="rehearse-test-")
    plan = os.path.join(tmp, "plan.toml")
    subprocess.run([trident, "plan", "--config", os.path.join(repo, "examples/plan-gpt3-175b-512-dgx-a100.toml"),
                    "--emit", plan], check=True, capture_output=True, env=env)
    # The plan's own micro-batches per pipeline (global / (micro x dp)): the derivation table must show them.
    with open(plan, "rb") as f:
        planned = tomllib.load(f)
    planned_micro_batches = planned["training"]["global_batch_size"] // (
        planned["training"]["micro_batch_size"] * planned["layout"]["dp"])
    out_dir = os.path.join(tmp, "the run")  # a space: Open MPI splits its launch agent's path there
    cmd = [trident, "rehearse", "--config", plan, "--ranks", "4", "--hosts", "2", "--steps", "4", "--tp-across",
           "--out", out_dir]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    out = r.stdout + r.stderr
    prefix = prefix_of(out)
    if r.returncode != 0:
        fail("exit %d:\n%s" % (r.returncode, out[-4000:]))
    for pattern in [r"as 4 ranks on 2 emulated hosts \(2 ranks each\)",
                    r"\n  layers +96 +\d+", r"\n  vocab +50257 +\d+", r"\n  tp +8 \(in a host\) +2 \(in a host\)",
                    r"\n  pp +8 \(crosses hosts\) +2 \(crosses hosts\)", r"micro-batches per pipeline +%d +\d+ +bubble" % planned_micro_batches,
                    r"precision bf16 -> fp32", r"attention flash -> unfused", r"overlap tp,dp,pp -> dp \(TP collectives block on CPU ranks; pipeline sends stay asynchronous there\)",
                    r"shaped by tc tbf to [0-9.]+ GB/s per direction; latency not shaped \(no netem\)",
                    r"measured [0-9.]+ GB/s, [0-9.]+ us one way", r"Rehearsal report: tp 2 x pp 2",
                    r"\n  placement probe: 4 ranks on 2 hosts of 2, all at once",
                    r"\n    compute share per rank: the sgemm alone [0-9.]+ us \(best CPU time\)",
                    r"\n    inside a host latency: exchange [0-9.]+ us - [0-9]+ bytes",
                    r"\n    between hosts latency: exchange [0-9.]+ us - [0-9]+ bytes",
                    r"\nVerdict: medians over the \d+ steps after \d+ warm-up step\(s\)",
                    r"\n  TP collectives +[0-9.]+ +[0-9.]+\.\.[0-9.]+ +[0-9.]+", r"machine load just before the run",
                    r"emulated hosts removed \(tr[0-9]+-\*\)"]:
        if not re.search(pattern, out):
            fail("missing /%s/ in:\n%s" % (pattern, out[-6000:]))
    v = check_verdict(out, out_dir)
    check_tp_across(v, out)
    check_calibration(v, out, out_dir, trident, plan, env)
    with open(os.path.join(out_dir, "rehearsal.html")) as f:
        page = f.read()
    for part in ['id="verdict"', 'id="tp-across"', 'id="self-calibration"', 'id="calibration-errors-1"',
                 'id="back-to-the-plan"', 'id="rehearsal-shape"', 'id="links"', 'id="rehearsal"',
                 v["sentence"][:40], "precision bf16 -&gt; fp32"]:
        if part not in page:
            fail("rehearsal.html lacks %s" % part)
    if prefix is None or leftovers(prefix):
        fail("left behind (%s): %s" % (prefix, leftovers(prefix or "tr")))
    print("ok: two-host rehearsal, verdict consistent, nothing left (%s)" % prefix)

    # Interrupted while measuring the link (SIGINT), and while training (SIGTERM): cleaned up.
    machine = os.path.join(out_dir, "machine.toml")
    for sig, wait_for in [(signal.SIGINT, "measuring the link"), (signal.SIGTERM, "running the rehearsal")]:
        folder = os.path.join(tmp, "stop-%d" % sig)
        code, out = run_interrupted(cmd[:-1] + [folder, "--bench", machine], env, wait_for, sig, folder)
        prefix = prefix_of(out)
        if prefix is None:
            fail("no emulated hosts were made before the signal:\n" + out[-3000:])
        if code != 128 + sig:
            fail("signal %d: exit %d, not %d:\n%s" % (sig, code, 128 + sig, out[-3000:]))
        if "everything it made was removed" not in out:
            fail("signal %d: no clean-up message:\n%s" % (sig, out[-3000:]))
        if leftovers(prefix):
            fail("signal %d left behind: %s" % (sig, leftovers(prefix)))
        print("ok: signal %d while '%s': exit %d, nothing left (%s)" % (sig, wait_for, code, prefix))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
