"""trident export writes a Llama checkpoint under Hugging Face's Llama names + config.json: an
independent PyTorch Llama written here the way Hugging Face's LlamaForCausalLM computes it
(rotate_half rotary embeddings, repeat_kv grouped-query attention, RMSNorm, SiLU-gated MLP,
untied head; transformers is not installed), loading the file by those names, gives the logits
`trident generate --logits` dumps, step by step, and the same greedy tokens."""
import json
import os

import numpy as np
import torch

from export_common import check, finish, load_safetensors, run, tmp


# 4 query heads sharing 2 kv heads, so the grouping and the k permutation are both exercised.
ck, out = os.path.join(tmp, "ck"), os.path.join(tmp, "hf")
run("train", "--family", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
    "--ffn-hidden", "96", "--seq-len", "32", "--steps", "8", "--global-batch-size", "8", "--micro-batch-size", "8",
    "--checkpoint", ck, "--threads", "2")
printed = run("export", "--checkpoint", ck, out).stdout
check("export names the Llama mapping", "Llama names" in printed, printed)


w, _ = load_safetensors(os.path.join(out, "model.safetensors"))
c = json.load(open(os.path.join(out, "config.json")))
check("config.json is Llama's", c["model_type"] == "llama" and (c["num_hidden_layers"], c["hidden_size"],
      c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]) == (2, 64, 4, 2, 96), c)
expected = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
for i in range(2):
    for k in ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
              "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
              "mlp.up_proj.weight", "mlp.down_proj.weight"):
        expected.add(f"model.layers.{i}.{k}")
check("exactly Hugging Face Llama's tensor names", set(w) == expected, set(w) ^ expected)
check("nn.Linear shapes ([out, in])", tuple(w["model.layers.0.self_attn.k_proj.weight"].shape) == (32, 64)
      and tuple(w["model.layers.0.mlp.down_proj.weight"].shape) == (64, 96))


def rms(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"]) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama(ids):
    T, C, H, KV = len(ids), c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c["head_dim"]
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()
    x = w["model.embed_tokens.weight"][ids]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(T, H, hd).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(T, KV, hd).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, KV, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)  # repeat_kv
        att = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, dim=-1)
        x = x + (att @ v).transpose(0, 1).reshape(T, C) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + g @ w[p + "mlp.down_proj.weight"].T
    return rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


prompt, steps = "The ", 6
logits_file = os.path.join(tmp, "logits.bin")
run("generate", "--checkpoint", ck, "--prompt", prompt, "--tokens", str(steps), "--top-k", "1", "--logits", logits_file)
theirs = np.fromfile(logits_file, dtype="<f4").reshape(steps, c["vocab_size"])
ids = list(prompt.encode())  # the byte tokenizer: token = byte
worst, greedy = 0.0, []
with torch.no_grad():
    for s in range(steps):
        mine = llama(torch.tensor(ids))[-1].numpy()
        worst = max(worst, float(np.abs(mine - theirs[s]).max() / (np.abs(theirs[s]).max() + 1e-9)))
        nxt = int(theirs[s].argmax())
        greedy.append(int(mine.argmax()) == nxt)
        ids.append(nxt)
check(f"PyTorch Llama (HF conventions) logits = trident generate's (worst relative error {worst:.2e})", worst < 1e-4,
      worst)
check("same greedy token at every step", all(greedy), greedy)

finish()
