"""Issue 48's Hugging Face round trip: a folder written here (safetensors, config.json,
tokenizer.json + tokenizer_config.json of a small Llama-shaped model; the tokenizer's 300 merges
trained by the Python reference) imports; `data prepare --tokenizer CKPT` gives the reference
tokenizer's ids; `train --init-from CKPT` fine-tunes 20 steps with the losses of a PyTorch Llama
written here from the public definition (Hugging Face's conventions), trained by torch's AdamW on
the same batches with the same schedule (1e-4 relative); `generate` reads the prompt through the
imported tokenizer; `export` writes back byte-identical weights and tokenizer files.
With an mpiexec argument, the fine-tune also runs at tp 2 and at pp 2 (ranks read their slices)."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import check, finish, hf_llama, load_safetensors, run, tmp, trident  # noqa: E402
from finetune_reference import Sampler, reference_losses, train_args  # noqa: E402
from finetune_reference import trident_losses as finetune_losses  # noqa: E402
from hf_folder import llama_config, llama_weights, raw_tensors, write_folder  # noqa: E402
import hf_tokenizer_reference as ref  # noqa: E402
from hf_tokenizer_reference import corpus, token_file_ids  # noqa: E402

torch.set_num_threads(1)
mpiexec = sys.argv[2] if len(sys.argv) > 2 else None

# The folder: tokenizer first (its vocabulary sizes the model).
text = corpus(30000)
tok = ref.Tokenizer(ref.train(text, ref.LLAMA3_PATTERN, 300), ["<|begin_of_text|>", "<|end_of_text|>"],
                    ref.LLAMA3_PATTERN, ignore_merges=True)
V = len(tok.vocab) + len(tok.added) + 2  # two unused rows, as published vocab sizes round up
c = llama_config(V=V, T=32, rope_theta=500000.0)
w = llama_weights(c, seed=5)
src = os.path.join(tmp, "hf")
write_folder(src, c, w, shards=2)
open(os.path.join(src, "tokenizer.json"), "w", encoding="utf-8").write(tok.json())
open(os.path.join(src, "tokenizer_config.json"), "w").write(json.dumps(
    {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
     "model_max_length": 32, "clean_up_tokenization_spaces": True}, indent=1))

ck = os.path.join(tmp, "ck")
printed = run("import", src, ck).stdout
check("import reads the tokenizer", "byte-level BPE" in printed and "300 merges" in printed, printed)

# data prepare with the checkpoint's tokenizer: the reference's ids.
data_txt, data = os.path.join(tmp, "corpus.txt"), os.path.join(tmp, "corpus.tokens")
open(data_txt, "w", encoding="utf-8", newline="").write(text)
run("data", "prepare", data_txt, data, "--tokenizer", ck)
ids = token_file_ids(data)
want = tok.encode(text)
check(f"data prepare --tokenizer CKPT gives the reference tokenizer's {len(want)} ids", ids == want)

# generate: the prompt through the imported tokenizer, logits of the PyTorch Llama on its ids.
prompt = "It's 12:30, café time! "
logits_file = os.path.join(tmp, "logits.bin")
run("generate", "--checkpoint", ck, "--prompt", prompt, "--tokens", "1", "--top-k", "1", "--logits", logits_file)
theirs = np.fromfile(logits_file, dtype="<f4")
C, T = c["hidden_size"], c["max_position_embeddings"]


def swiglu_of(w):
    def mlp(h, p):
        return (F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    return mlp


with torch.no_grad():
    mine = hf_llama(w, c, torch.tensor(tok.encode(prompt)), swiglu_of(w))[-1].numpy()
err = float(np.abs(mine - theirs).max() / np.abs(mine).max())
check(f"generate encodes the prompt with the imported tokenizer (logits vs PyTorch: {err:.1e})", err < 1e-4, err)

# Fine-tune: 20 steps from the imported weights, new AdamW, this run's schedule.
steps, B, b, seed = 20, 4, 2, 3
opt = {"lr": 1e-3, "min_lr": 1e-4, "warmup": 2, "weight_decay": 0.1, "grad_clip": 1.0, "beta1": 0.9, "beta2": 0.95,
       "eps": 1e-8}
args = train_args(ck, data, steps, B, b, seed, opt)


def trident_losses(metrics, launcher=(), layout=()):
    return finetune_losses(trident, args, metrics, launcher, layout)


ref_losses = reference_losses(w, lambda p, x, y: F.cross_entropy(hf_llama(p, c, x, swiglu_of(p)), y),
                              Sampler(ids, T, seed), steps, B, b, opt)

losses = trident_losses(os.path.join(tmp, "one.jsonl"))
rel = max(abs(a - r) / abs(r) for a, r in zip(losses, ref_losses)) if len(losses) == steps else float("inf")
print("trident:  ", " ".join(f"{x:.5f}" for x in losses))
print("reference:", " ".join(f"{x:.5f}" for x in ref_losses))
check(f"train --init-from: 20 losses = the PyTorch reference's (worst relative error {rel:.1e})", rel < 1e-4, rel)
check("the fine-tune learns (last loss below the first)", ref_losses[-1] < ref_losses[0] - 0.05, ref_losses)
if mpiexec:
    for layout in (["--tp", "2"], ["--pp", "2"]):
        lay = trident_losses(os.path.join(tmp, "lay.jsonl"), (mpiexec, "--oversubscribe", "-np", "2"), layout)
        rel = max(abs(a - r) / abs(r) for a, r in zip(lay, ref_losses)) if len(lay) == steps else float("inf")
        check(f"train --init-from at {' '.join(layout)} (ranks read their slices): the reference's losses "
              f"({rel:.1e})", rel < 1e-4, rel)

# import -> export: weights and tokenizer files byte-identical.
out = os.path.join(tmp, "out")
printed = run("export", "--checkpoint", ck, out).stdout
back = raw_tensors(os.path.join(out, "model.safetensors"))
given = {}
for f in os.listdir(src):
    if f.endswith(".safetensors"):
        given.update(raw_tensors(os.path.join(src, f)))
same = [n for n in given if n in back and back[n] == given[n]]
check(f"export writes back byte-identical weights ({len(same)} of {len(given)} tensors)",
      len(same) == len(given) and set(back) == set(given))
for f in ("tokenizer.json", "tokenizer_config.json"):
    check(f"export writes back {f} byte-identical", os.path.exists(os.path.join(out, f)) and
          open(os.path.join(out, f), "rb").read() == open(os.path.join(src, f), "rb").read(), printed)

finish()
