"""trident export writes Hugging Face GPT-2 safetensors + config.json: an independent PyTorch GPT-2
written here (transformers is not installed), loading the file by HF's names, gives the logits
`trident generate --logits` dumps, step by step, and the same greedy tokens."""
import json
import os

import torch

from export_common import against_generate, check, finish, load_safetensors, run, tmp


ck, out = os.path.join(tmp, "ck"), os.path.join(tmp, "hf")
run("train", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "32", "--steps", "8",
    "--global-batch-size", "8", "--micro-batch-size", "8", "--checkpoint", ck, "--threads", "2")
run("export", "--checkpoint", ck, "--format", "safetensors", out)


w, meta = load_safetensors(os.path.join(out, "model.safetensors"))
cfg = json.load(open(os.path.join(out, "config.json")))
check("config.json is GPT-2's", cfg["model_type"] == "gpt2" and (cfg["n_layer"], cfg["n_embd"], cfg["n_head"],
      cfg["n_positions"]) == (2, 64, 4, 32), cfg)
expected = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"}
for i in range(2):
    for k in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
              "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
              "mlp.c_proj.weight", "mlp.c_proj.bias"):
        expected.add(f"transformer.h.{i}.{k}")
check("exactly Hugging Face GPT-2's tensor names", set(w) == expected, set(w) ^ expected)
check("Conv1D shapes ([in, out])", tuple(w["transformer.h.0.attn.c_attn.weight"].shape) == (64, 192)
      and tuple(w["transformer.h.0.mlp.c_proj.weight"].shape) == (256, 64))


class GPT2(torch.nn.Module):
    """GPT-2 as Radford et al. and Hugging Face define it, from the config and the named tensors."""

    def __init__(self, c, w):
        super().__init__()
        self.c, self.w = c, w

    def ln(self, x, p):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), self.w[p + ".weight"], self.w[p + ".bias"],
                                              c["layer_norm_epsilon"])

    def forward(self, ids):
        w, c = self.w, self.c
        T, C, H = len(ids), c["n_embd"], c["n_head"]
        x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        for i in range(c["n_layer"]):
            p = f"transformer.h.{i}."
            h = self.ln(x, p + "ln_1")
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (t.view(T, H, C // H).transpose(0, 1) for t in qkv.split(C, dim=-1))
            att = torch.softmax(q @ k.transpose(-1, -2) / (C // H) ** 0.5 + mask, dim=-1)
            y = (att @ v).transpose(0, 1).reshape(T, C)
            x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = self.ln(x, p + "ln_2")
            h = torch.nn.functional.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = self.ln(x, "transformer.ln_f")
        return x @ w["transformer.wte.weight"].T  # tied head


c = cfg
model = GPT2(cfg, w)
worst, greedy, text, ids = against_generate(ck, model, cfg["vocab_size"])
check(f"PyTorch GPT-2 logits = trident generate's (worst relative error {worst:.2e})", worst < 1e-4, worst)
check("same greedy token at every step", all(greedy), greedy)
# The byte tokenizer: generate prints the prompt, then each greedy token as its byte.
check("generate printed the prompt and the greedy tokens", text == bytes(ids).decode() + "\n", (text, bytes(ids)))

# Bad outputs are refused, the checkpoint is never replaced.
run("export", "--checkpoint", ck, "--format", "safetensors", ck, want=2)
run("export", "--checkpoint", ck, "--format", "onnx", os.path.join(tmp, "x"), want=2)
open(os.path.join(tmp, "file"), "w").write("keep")
run("export", "--checkpoint", ck, "--format", "safetensors", os.path.join(tmp, "file"), want=2)
check("a file in the way is left alone", open(os.path.join(tmp, "file")).read() == "keep")

finish()
