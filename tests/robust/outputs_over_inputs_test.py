#!/usr/bin/env python3
"""No output of a command replaces one of its inputs: every output flag is checked against the
one list of the command's inputs (config, --cost, --data and its tokenizer, --resume and the
checkpoint's files), each refused with exit 2 naming both paths, the input left byte-identical.
usage: outputs_over_inputs_test.py TRIDENT"""
import hashlib
import os
import sys
import tempfile

from robust_cases import TINY, check, finish, refused, run, train

PLAN = ["--model", "gpt3-125m", "--global-batch-size", "16"]
LAYOUT = ["--tp", "1", "--pp", "2", "--dp", "4", "--micro-batch-size", "1"]


def digest(path):
    if os.path.isdir(path):
        return sorted((f, digest(os.path.join(path, f))) for f in os.listdir(path))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    trident = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-outputs-")
    cost = os.path.join(d, "c.toml")
    with open(cost, "w") as f:
        f.write("[default]\ngemm_peak_efficiency = 0.7\n")
    ck = train(trident, os.path.join(d, "ck"))
    manifest = os.path.join(ck, "manifest.json")
    os.link(manifest, os.path.join(d, "hard.json"))  # the manifest by another name
    before = {p: digest(p) for p in (cost, ck)}
    for flag in ["--emit", "--html"]:
        refused("plan --cost c.toml %s c.toml" % flag, run(trident, "plan", *PLAN, "--cost", cost, flag, cost),
                "--cost '%s'" % cost, "%s '%s'" % (flag, cost))
    for flag in ["--svg", "--trace", "--html"]:
        refused("simulate --cost c.toml %s c.toml" % flag,
                run(trident, "simulate", *PLAN, *LAYOUT, "--cost", cost, flag, cost), "--cost '%s'" % cost)
    refused("lint --cost c.toml --html c.toml", run(trident, "lint", *PLAN, *LAYOUT, "--cost", cost, "--html", cost),
            "--cost '%s'" % cost)
    refused("train --cost c.toml --report c.toml",
            run(trident, "train", *TINY, "--steps", "1", "--cost", cost, "--report", cost), "--cost '%s'" % cost)
    refused("generate --logits CK/manifest.json",
            run(trident, "generate", "--checkpoint", ck, "--tokens", "2", "--logits", manifest), "--logits", ck)
    refused("generate --logits (a hard link to the manifest)",
            run(trident, "generate", "--checkpoint", ck, "--tokens", "2", "--logits", os.path.join(d, "hard.json")),
            "--logits", manifest)
    refused("train --resume CK --metrics CK/manifest.json",
            run(trident, "train", "--resume", ck, "--steps", "3", "--metrics", manifest), "--metrics", ck)
    refused("export --checkpoint CK CK/hf", run(trident, "export", "--checkpoint", ck, os.path.join(ck, "hf")), "OUT", ck)
    # rehearse writes its files into --out: a plan kept there under one of their names is refused.
    reh = os.path.join(d, "reh")
    os.makedirs(reh)
    kept = os.path.join(reh, "fitted-cost.toml")
    with open(kept, "w") as f:
        f.write("[default]\ngemm_peak_efficiency = 0.7\n")
    before[kept] = digest(kept)
    refused("rehearse --cost OUT/fitted-cost.toml --out OUT",
            run(trident, "rehearse", *PLAN, *LAYOUT, "--cost", kept, "--out", reh, "--hosts", "1", "--dry-run"),
            "--cost '%s'" % kept)
    for p, h in before.items():
        check("input unchanged: " + os.path.basename(p), digest(p) == h)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
