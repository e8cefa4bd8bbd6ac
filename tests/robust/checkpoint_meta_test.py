#!/usr/bin/env python3
"""Every checkpoint reader (export, generate, resume) refuses a checkpoint whose meta describes
another model than its tensors, through the one check of meta against tensors: kv-heads 4 over
tensors of 2, ffn 512 over 256, another hidden size, vocabulary, sequence length (GPT's learned
positions) or layer count. Each is exit 2 naming the tensor, and export writes nothing.
usage: checkpoint_meta_test.py TRIDENT"""
import json
import os
import shutil
import sys
import tempfile

from robust_cases import check, finish, refused, run, train


def edited(src, dst, **model):
    shutil.copytree(src, dst)
    path = os.path.join(dst, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    m["meta"]["model"].update(model)
    with open(path, "w") as f:
        json.dump(m, f)
    return dst


def main():
    trident = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="trident-meta-")
    p = lambda name: os.path.join(d, name)
    # Llama with grouped-query attention: 4 heads, 2 kv heads, ffn 256.
    llama = train(trident, p("llama"), "--family", "llama", "--heads", "4", "--kv-heads", "2", "--ffn-hidden", "256")
    gpt = train(trident, p("gpt"))
    cases = [("llama kv-heads 4 (tensors of 2)", edited(llama, p("kv4"), kv_heads=4), "kv_w"),
             ("llama ffn 512 (tensors of 256)", edited(llama, p("ffn512"), ffn_hidden=512), "gate_up_w"),
             ("gpt hidden 48 (tensors of 32)", edited(gpt, p("hidden48"), hidden=48), "wte"),
             ("gpt vocab 200 (tensors of 256)", edited(gpt, p("vocab200"), vocab=200), "wte"),
             ("gpt seq-len 64 (tensors of 32)", edited(gpt, p("seq64"), seq_len=64), "wpe"),
             ("gpt 2 layers (tensors of 1)", edited(gpt, p("layers2"), layers=2), "layers.1.")]
    # A layer the meta does not have (export would drop it): two layers stored, the meta says one.
    two = train(trident, p("two"), "--layers", "2")
    cases.append(("gpt 1 layer (tensors of 2)", edited(two, p("layers1"), layers=1), "layers.1."))
    for name, ck, tensor in cases:
        out = p("hf-" + os.path.basename(ck))
        refused("export: " + name, run(trident, "export", "--checkpoint", ck, out), tensor, "describes a model its tensors are not")
        check("export wrote nothing: " + name, not os.path.exists(out))
        refused("generate: " + name, run(trident, "generate", "--checkpoint", ck, "--tokens", "2"), tensor,
                "describes a model its tensors are not")
        refused("resume: " + name, run(trident, "train", "--resume", ck, "--steps", "3", "--threads", "1"), tensor,
                "describes a model its tensors are not")
    rc, out = run(trident, "export", "--checkpoint", llama, p("hf-good"))
    check("the unedited checkpoint exports", rc == 0, out[-800:])
    shutil.rmtree(d, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
