"""Issue 48's Hugging Face round trip: a folder written here (safetensors, config.json,
tokenizer.json + tokenizer_config.json of a small Llama-shaped model; the tokenizer's 300 merges
trained by the Python reference) imports; `data prepare --tokenizer CKPT` gives the reference
tokenizer's ids; `train --init-from CKPT` fine-tunes 20 steps with the losses of a PyTorch Llama
written here from the public definition (Hugging Face's conventions), trained by torch's AdamW on
the same batches with the same schedule (1e-4 relative); `generate` reads the prompt through the
imported tokenizer; `export` writes back byte-identical weights and tokenizer files.
With an mpiexec argument, the fine-tune also runs at tp 2 and at pp 2 (ranks read their slices)."""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import check, finish, hf_llama, load_safetensors, run, tmp, trident  # noqa: E402
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
train_args = ["train", "--init-from", ck, "--data", data, "--steps", str(steps), "--global-batch-size", str(B),
              "--micro-batch-size", str(b), "--lr", str(opt["lr"]), "--min-lr", str(opt["min_lr"]),
              "--warmup", str(opt["warmup"]), "--weight-decay", str(opt["weight_decay"]),
              "--grad-clip", str(opt["grad_clip"]), "--seed", str(seed), "--eval-every", str(steps)]


def trident_losses(metrics, launcher=(), layout=()):
    cmd = [*launcher, trident, *train_args, *layout, "--metrics", metrics]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600, env=env)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    rows = [json.loads(line) for line in open(metrics)]
    return [r["loss"] for r in rows if "loss" in r and "step" in r]


M = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


# The sampler's batches (runtime/data/sampler.cpp, from its definition): the last 10% is
# validation; sequence i of step s starts at mix64(mix64(mix64(seed) + s) + i) mod (train - T).
tokens = np.array(ids, dtype=np.int64)
val = min(max(int(len(tokens) * 0.1), T + 1), len(tokens) // 2)
positions = len(tokens) - val - T


def batch(step, first, count):
    starts = [mix64((mix64((mix64(seed) + step) & M) + first + i) & M) % positions for i in range(count)]
    return (torch.tensor(np.stack([tokens[s:s + T] for s in starts])),
            torch.tensor(np.stack([tokens[s + 1:s + T + 1] for s in starts])))


def lr_at(step):
    if step < opt["warmup"]:
        return opt["lr"] * (step + 1) / opt["warmup"]
    progress = (step - opt["warmup"]) / (steps - opt["warmup"])
    return opt["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (opt["lr"] - opt["min_lr"])


params = {n: t.clone().requires_grad_(True) for n, t in w.items()}
decay = [t for n, t in params.items() if "norm" not in n]  # matrices and embeddings decay, the RMSNorm weights not
optim = torch.optim.AdamW([{"params": decay, "weight_decay": opt["weight_decay"]},
                           {"params": [t for n, t in params.items() if "norm" in n], "weight_decay": 0.0}],
                          lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
ref_losses = []
for step in range(steps):
    optim.zero_grad()
    total = 0.0
    for micro in range(B // b):
        x, y = batch(step, micro * b, b)
        loss = sum(F.cross_entropy(hf_llama(params, c, x[i], swiglu_of(params)), y[i]) for i in range(b)) / b
        (loss / (B // b)).backward()
        total += loss.item() / (B // b)
    ref_losses.append(total)
    norm = torch.sqrt(sum((t.grad.double() ** 2).sum() for t in params.values())).item()
    if norm > opt["grad_clip"]:  # global-norm clipping: scaled to the limit
        for t in params.values():
            t.grad.mul_(opt["grad_clip"] / norm)
    for g in optim.param_groups:
        g["lr"] = lr_at(step)
    optim.step()

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
