#!/usr/bin/env python3
"""A model flag that contradicts the checkpoint being resumed is refused (exit 2, both values
named) by the one run check, never silently replaced by the checkpoint's value; flags equal to
the checkpoint's are accepted.
usage: resume_flags_test.py TRIDENT"""
import os
import shutil
import sys
import tempfile

from robust_cases import check, finish, refused, run, train


def main():
    trident = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-resume-")
    ck = train(trident, os.path.join(d, "ck"))  # GPT, 1 layer, hidden 32, 2 heads, ffn 128, seq 32, vocab 256, tied
    resume = ["train", "--resume", ck, "--steps", "3", "--threads", "1"]
    cases = [(["--seq-len", "64"], "--seq-len 64 (the checkpoint's is 32)"),
             (["--vocab", "300"], "--vocab 300 (the checkpoint's is 256)"),
             (["--ffn-hidden", "64"], "--ffn-hidden 64 (the checkpoint's is 128)"),
             (["--family", "llama"], "--family llama (the checkpoint's is gpt)"),
             (["--kv-heads", "1"], "--kv-heads 1 (the checkpoint's is 2)"),
             (["--no-tied-embeddings"], "--tied-embeddings false (the checkpoint's is true)"),
             (["--experts", "4", "--experts-per-token", "2", "--expert-ffn-hidden", "32"],
              "--experts 4 (the checkpoint's is 0)"),
             (["--window-size", "8"], "--window-size 8 (the checkpoint's is 0)"),
             (["--attention-sinks"], "--attention-sinks true (the checkpoint's is false)"),
             (["--activation-func-clamp-value", "7"], "--activation-func-clamp-value 7 (the checkpoint's is 0)"),
             (["--no-add-bias-linear"], "--add-bias-linear false/false/false (the checkpoint's is true/true/false)"),
             (["--hidden", "64"], "--hidden 64 (the checkpoint's is 32)")]
    for flags, named in cases:
        refused("resume with " + " ".join(flags), run(trident, *resume, *flags), named, "resume-model")
    # All of them at once: one problem naming each.
    everything = [x for flags, _ in cases[:-1] for x in flags]
    refused("resume with every contradicting flag", run(trident, *resume, *everything), *[n for _, n in cases[:-1]])
    rc, out = run(trident, *resume, "--seq-len", "32", "--vocab", "256", "--hidden", "32")
    check("resume with the checkpoint's own sizes trains", rc == 0, out[-800:])
    # GPT-OSS's biases and clamped unit (a Llama model): a resume without their flags keeps the
    # checkpoint's (run_meta.cpp, resumed_run.cpp), and one contradicting them is refused.
    oss = train(trident, os.path.join(d, "oss"), "--family", "llama", "--activation-func-clamp-value", "7",
                "--add-bias-linear")
    rc, out = run(trident, "train", "--resume", oss, "--steps", "3", "--threads", "1")
    check("a GPT-OSS-shaped resume keeps the biases and the clamp", rc == 0 and
          "q/k/v biases, linear biases, gated unit clamped at 7" in out, out[-800:])
    refused("resume with another clamp",
            run(trident, "train", "--resume", oss, "--steps", "3", "--threads", "1", "--activation-func-clamp-value", "5"),
            "--activation-func-clamp-value 5 (the checkpoint's is 7)")
    shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
