#!/usr/bin/env python3
"""Resume is the run: `train --resume CKPT` with no other flag continues the checkpoint's run
(model, MoE sizes and router, batch, learning-rate schedule, seed, data) with the losses the
uninterrupted run had; a given setting that differs is refused naming both values, or (more
steps, a new layout) applied and printed in the start-up table as a change. `--init-from CKPT`
takes the weights only and starts at step 0 with a new optimizer state.
usage: resume_is_the_run_test.py TRIDENT [MPIRUN]"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from robust_cases import check, finish, refused, run

# A run whose every setting differs from train's defaults (so a resume that drops one shows).
RUN = ["--layers", "2", "--hidden", "32", "--heads", "2", "--ffn-hidden", "64", "--seq-len", "16", "--threads", "1",
       "--steps", "12", "--lr", "4e-3", "--min-lr", "2e-4", "--warmup", "5", "--weight-decay", "0.05",
       "--grad-clip", "0.7", "--seed", "7", "--global-batch-size", "4", "--micro-batch-size", "2",
       "--eval-every", "0", "--eval-batches", "1"]
MOE = ["--experts", "4", "--experts-per-token", "2", "--expert-ffn-hidden", "32", "--no-moe-normalise",
       "--moe-aux-loss-coeff", "0.02"]


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def lrs(path):
    return [json.loads(line)["lr"] for line in open(path)]


def tensors(ck):
    """Every tensor of a checkpoint, by name, as a flat list of floats in row-major order."""
    manifest = json.load(open(os.path.join(ck, "manifest.json")))
    out = {}
    for name, t in manifest["tensors"].items():
        rows = t["shape"][0]
        cols = t["shape"][1] if len(t["shape"]) > 1 else 1
        data = [0.0] * (rows * cols)
        for s in t["slices"]:
            r0, c0 = s["start"]
            nr, nc = s["extent"]
            with open(os.path.join(ck, s["file"]), "rb") as f:
                f.seek(s["offset"])
                block = struct.unpack("<%df" % (nr * nc), f.read(4 * nr * nc))
            for r in range(nr):
                data[(r0 + r) * cols + c0:(r0 + r) * cols + c0 + nc] = block[r * nc:(r + 1) * nc]
        out[name] = data
    return out


def continued(name, straight, resumed_metrics, first):
    """The resumed run's losses are the straight run's from step `first` + 1 on, bit for bit."""
    got, want = losses(resumed_metrics), losses(straight)[first:]
    check(name, got == want, "resumed %s\nstraight %s" % (got, want))


def main():
    trident = os.path.abspath(sys.argv[1])
    mpirun = sys.argv[2] if len(sys.argv) > 2 else ""
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    d = tempfile.mkdtemp(prefix="trident-resume-run-")
    p = lambda name: os.path.join(d, name)

    # The uninterrupted run, and the same run stopped at step 6.
    rc, out = run(trident, "train", *RUN, "--metrics", p("a.jsonl"))
    check("the straight run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", *RUN, "--stop-at", "6", "--checkpoint", p("ck"))
    check("the stopped run trains", rc == 0, out[-800:])

    # 1. Resume with no flag but the checkpoint: the same losses and learning rates.
    rc, out = run(trident, "train", "--resume", p("ck"), "--threads", "1", "--metrics", p("b.jsonl"))
    check("resume without repeating any flag trains", rc == 0, out[-1500:])
    if rc == 0:
        continued("resume without any flag continues with the uninterrupted losses", p("a.jsonl"), p("b.jsonl"), 6)
        check("resume without any flag keeps the learning-rate schedule", lrs(p("b.jsonl")) == lrs(p("a.jsonl"))[6:],
              "%s vs %s" % (lrs(p("b.jsonl")), lrs(p("a.jsonl"))[6:]))
        check("resume runs to the checkpoint's --steps", re.search(r"^step +12/12 \|", out, re.M) is not None, out[-600:])

    # 2. A given setting that differs is refused, naming the flag and both values.
    for flags, named in [(["--lr", "1e-3"], ["--lr 0.001", "0.004"]),
                         (["--seed", "3"], ["--seed 3", "7"]),
                         (["--global-batch-size", "8"], ["--global-batch-size 8", "4"]),
                         (["--warmup", "2"], ["--warmup 2", "5"]),
                         (["--min-lr", "1e-4"], ["--min-lr 0.0001", "0.0002"]),
                         (["--weight-decay", "0.1"], ["--weight-decay 0.1", "0.05"]),
                         (["--grad-clip", "1"], ["--grad-clip 1", "0.7"])]:
        refused("resume with " + " ".join(flags) + " is refused", run(trident, "train", "--resume", p("ck"), "--threads",
                                                                       "1", *flags), *named, "resume-setting")
    # Equal values, however written, are accepted.
    rc, out = run(trident, "train", "--resume", p("ck"), "--threads", "1", "--lr", "0.004", "--seed", "7",
                  "--stop-at", "7")
    check("resume with the checkpoint's own values is accepted", rc == 0, out[-800:])

    # 3. More steps: applied, and printed as a change.
    rc, out = run(trident, "train", "--resume", p("ck"), "--threads", "1", "--steps", "14")
    check("resume with more --steps trains", rc == 0, out[-800:])
    check("more --steps is printed as a change", "steps 12 -> 14 (given)" in out, out[:3000])

    # A new layout: applied and printed (dp 2 under mpirun), continuing near the straight losses
    # (another reduction order: not bit for bit).
    if mpirun:
        rc, out = run(mpirun, "--oversubscribe", "-np", "2", trident, "train", "--resume", p("ck"), "--threads", "1",
                      "--dp", "2", "--metrics", p("dp.jsonl"))
        check("resume in a new layout (dp 2) trains", rc == 0, out[-1500:])
        check("the new layout is printed as a change", "dp 1 -> 2 (given)" in out, out[:3000])
        if rc == 0:
            got, want = losses(p("dp.jsonl")), losses(p("a.jsonl"))[6:]
            check("the new layout continues the run's losses",
                  len(got) == len(want) and all(abs(a - b) < 1e-3 * abs(b) for a, b in zip(got, want)),
                  "%s vs %s" % (got, want))

    # 4. A MoE checkpoint (4 experts, router not normalised) resumes without --experts.
    rc, out = run(trident, "train", *RUN, *MOE, "--metrics", p("moe-a.jsonl"))
    check("the straight MoE run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", *RUN, *MOE, "--stop-at", "6", "--checkpoint", p("moe"))
    check("the stopped MoE run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", "--resume", p("moe"), "--threads", "1", "--metrics", p("moe-b.jsonl"))
    check("a MoE checkpoint resumes without --experts", rc == 0, out[-1500:])
    if rc == 0:
        check("the resumed MoE router keeps --no-moe-normalise", "chosen scores as weights" in out, out[:3000])
        continued("the resumed MoE run continues with the uninterrupted losses", p("moe-a.jsonl"), p("moe-b.jsonl"), 6)
    refused("a MoE checkpoint resumed with --moe-normalise is refused",
            run(trident, "train", "--resume", p("moe"), "--threads", "1", "--moe-normalise"),
            "--moe-normalise true", "false", "resume-setting")

    # 4b. DeepSeek-V3's router: the expert bias is no parameter, it lives in the checkpoint's meta;
    # a resume carries it (the uninterrupted losses), and the same checkpoint with the bias zeroed
    # does not continue them (so the check above can fail when the bias is dropped).
    bias = ["--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
            "--moe-router-bias-update-rate", "0.05", "--moe-router-topk-scaling-factor", "2.5"]
    ds = [*RUN, *MOE[:6], *bias]
    rc, out = run(trident, "train", *ds, "--metrics", p("ds-a.jsonl"))
    check("the straight sigmoid-router run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", *ds, "--stop-at", "6", "--checkpoint", p("ds"))
    check("the stopped sigmoid-router run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", "--resume", p("ds"), "--threads", "1", "--metrics", p("ds-b.jsonl"))
    check("a sigmoid-router checkpoint resumes without its flags", rc == 0, out[-1500:])
    if rc == 0:
        check("the resumed router keeps sigmoid scores and the bias", "top-k on score + expert bias" in out, out[:3000])
        continued("the resumed sigmoid-router run continues with the uninterrupted losses", p("ds-a.jsonl"),
                  p("ds-b.jsonl"), 6)
        shutil.copytree(p("ds"), p("ds0"))
        manifest = json.load(open(p("ds0/manifest.json")))
        table = manifest["meta"]["router"]["expert_bias"]
        check("the checkpoint holds a moved bias", any(v != 0 for row in table for v in row), table)
        manifest["meta"]["router"]["expert_bias"] = [[0.0] * len(row) for row in table]
        json.dump(manifest, open(p("ds0/manifest.json"), "w"))
        rc, out = run(trident, "train", "--resume", p("ds0"), "--threads", "1", "--metrics", p("ds-c.jsonl"))
        check("the checkpoint with the bias zeroed resumes", rc == 0, out[-1500:])
        if rc == 0:
            check("with the bias zeroed the losses differ (the bias is what carries the routing)",
                  losses(p("ds-c.jsonl")) != losses(p("ds-a.jsonl"))[6:], losses(p("ds-c.jsonl")))

    # 4c. DeepSeek-V3's multi-token prediction: its loss weight (0.5, not the default 0.1) is the
    # checkpoint's; a resume without the flag continues the uninterrupted losses, another given
    # weight is applied and printed as a change (and gives other losses).
    mtp = [*RUN, "--family", "llama", "--mtp-num-layers", "1", "--mtp-loss-scaling-factor", "0.5"]
    rc, out = run(trident, "train", *mtp, "--metrics", p("mtp-a.jsonl"))
    check("the straight MTP run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", *mtp, "--stop-at", "6", "--checkpoint", p("mtp"))
    check("the stopped MTP run trains", rc == 0, out[-800:])
    rc, out = run(trident, "train", "--resume", p("mtp"), "--threads", "1", "--metrics", p("mtp-b.jsonl"))
    check("an MTP checkpoint resumes without its flags", rc == 0, out[-1500:])
    if rc == 0:
        check("the resumed run keeps the MTP loss weight 0.5", "loss weighted 0.5 / 1" in out, out[:3000])
        continued("the resumed MTP run continues with the uninterrupted losses", p("mtp-a.jsonl"), p("mtp-b.jsonl"), 6)
    rc, out = run(trident, "train", "--resume", p("mtp"), "--threads", "1", "--mtp-loss-scaling-factor", "0.2",
                  "--metrics", p("mtp-c.jsonl"))
    check("an MTP checkpoint resumes with another --mtp-loss-scaling-factor", rc == 0, out[-1500:])
    if rc == 0:
        check("the new MTP loss weight is printed as a change and applied",
              "mtp-loss-scaling-factor 0.5 -> 0.2 (given)" in out and "loss weighted 0.2 / 1" in out, out[:3000])
        check("the new MTP loss weight gives other losses", losses(p("mtp-c.jsonl")) != losses(p("mtp-a.jsonl"))[6:],
              losses(p("mtp-c.jsonl")))

    # 5. --init-from: the checkpoint's weights, step 0, a new optimizer state and schedule.
    rc, out = run(trident, "train", "--init-from", p("ck"), "--threads", "1", "--steps", "1", "--lr", "1e-9",
                  "--warmup", "0", "--checkpoint", p("init"), "--metrics", p("init.jsonl"))
    check("--init-from trains", rc == 0, out[-1500:])
    if rc == 0:
        check("--init-from starts at step 1", re.search(r"^step +1/1 \|", out, re.M) is not None, out[-600:])
        meta = json.load(open(p("init/manifest.json")))["meta"]
        check("--init-from's checkpoint is at step 1 of its own schedule", meta["step"] == 1 and meta["steps"] == 1,
              json.dumps(meta)[:300])
        old, new = tensors(p("ck")), tensors(p("init"))
        params = [n for n in old if not n.startswith("optimizer.")]
        worst = max(abs(a - b) for n in params for a, b in zip(old[n], new[n]))
        check("--init-from starts from the checkpoint's weights", worst < 1e-6, "largest difference %g" % worst)
        # A new optimizer state: after one step the second moment is (1 - beta2) g^2, not the old one's.
        v_old = old["optimizer.v." + params[0]]
        v_new = new["optimizer.v." + params[0]]
        check("--init-from starts a new optimizer state", v_old != v_new)
        fresh_loss = None
        fresh = [x for i in range(0, len(RUN), 2) if RUN[i] not in ("--steps", "--warmup") for x in RUN[i:i + 2]]
        rc2, out2 = run(trident, "train", *fresh, "--steps", "1", "--warmup", "0", "--metrics", p("fresh.jsonl"))
        check("a fresh run of one step trains", rc2 == 0, out2[-800:])
        if rc2 == 0:
            fresh_loss = losses(p("fresh.jsonl"))[0]
        check("--init-from's first loss is the trained model's, below a fresh model's",
              fresh_loss is not None and losses(p("init.jsonl"))[0] < fresh_loss - 0.05,
              "%s vs fresh %s" % (losses(p("init.jsonl")), fresh_loss))
    refused("--init-from together with --resume is refused",
            run(trident, "train", "--init-from", p("ck"), "--resume", p("ck"), "--threads", "1"),
            "--init-from", "--resume")

    shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
