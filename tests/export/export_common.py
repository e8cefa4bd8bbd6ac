"""What both export tests share: the trident binary, a scratch folder, check/run and a reader of
safetensors files written independently of Trident's writer (the format's spec: an 8-byte header
length, a JSON header of dtype/shape/data_offsets, then the bytes)."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from checks import check, finish  # noqa: E402
from yarn_reference import hf_yarn_parameters, is_yarn  # noqa: E402

trident = sys.argv[1]
tmp = tempfile.mkdtemp()


def run(*args, want=0):
    p = subprocess.run([trident, *args], capture_output=True, text=True, errors="replace", timeout=300)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}, want {want}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p


def load_safetensors(path):
    """(tensors by name as float32 torch tensors, the __metadata__ dict)"""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", h
        b, e = h["data_offsets"]
        tensors[name] = torch.from_numpy(np.frombuffer(raw[base + b:base + e], dtype="<f4").copy()).reshape(h["shape"])
    return tensors, header.get("__metadata__", {})



def rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def linear(x, w, name):
    """nn.Linear by Hugging Face's names: name.weight [out, in], and name.bias when the file has one."""
    y = x @ w[name + ".weight"].T
    return y + w[name + ".bias"] if name + ".bias" in w else y


def hf_llama(w, c, ids, mlp):
    """Logits [T, V] of the Llama-shaped model Hugging Face's LlamaForCausalLM,
    MixtralForCausalLM, Qwen2MoeForCausalLM (q/k/v with biases; head_dim = hidden / heads,
    as its config has none) and Qwen3(Moe)ForCausalLM (heads of head_dim, q_norm / k_norm) compute (rotate_half rotary embeddings, repeat_kv grouped-query
    attention, RMSNorm, untied head), from the config c and the tensors w by HF's names.
    mlp(h, prefix) is the layer's MLP on the normed rows h, prefix "model.layers.{i}."."""
    T, C, H, KV = len(ids), c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, eps = c.get("head_dim", C // H), c["rms_norm_eps"]
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    rs = c.get("rope_scaling") or {}
    if rs.get("rope_type") == "llama3":  # Llama 3.1: _compute_llama3_parameters' rewrite of inv_freq
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        inv_freq = torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    attn = 1.0  # YaRN (GPT-OSS's): _compute_yarn_parameters' frequencies and attention factor on cos and sin
    if is_yarn(rs):
        inv_freq, attn = hf_yarn_parameters(rs, c["rope_theta"], hd, c.get("max_position_embeddings"))
        inv_freq = inv_freq.double()
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = (emb.cos() * attn).float(), (emb.sin() * attn).float()
    x = w["model.embed_tokens.weight"][ids]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"], eps)
        q, k, v = (linear(h, w, p + f"self_attn.{n}_proj").view(T, heads, hd).transpose(0, 1)
                   for n, heads in (("q", H), ("k", KV), ("v", KV)))
        if p + "self_attn.q_norm.weight" in w:  # Qwen3: RMSNorm over each head's queries and keys, before RoPE
            q, k = rms(q, w[p + "self_attn.q_norm.weight"], eps), rms(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)  # repeat_kv
        att = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, dim=-1)
        x = x + (att @ v).transpose(0, 1).reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T
        x = x + mlp(rms(x, w[p + "post_attention_layernorm.weight"], eps), p)
    return rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def against_generate(ck, model, vocab, prompt="The ", steps=6):
    """Runs `trident generate --top-k 1 --logits` on ck and model(ids) -> logits [T, V] on the same
    growing context: (worst relative logits error over the steps, whether each step's greedy token
    agrees, generate's printed text, the final ids)."""
    logits_file = os.path.join(tmp, "logits.bin")
    text = run("generate", "--checkpoint", ck, "--prompt", prompt, "--tokens", str(steps), "--top-k", "1",
               "--logits", logits_file).stdout
    theirs = np.fromfile(logits_file, dtype="<f4").reshape(steps, vocab)
    ids = list(prompt.encode())  # the byte tokenizer: token = byte
    worst, greedy = 0.0, []
    with torch.no_grad():
        for s in range(steps):
            mine = model(torch.tensor(ids))[-1].numpy()
            worst = max(worst, float(np.abs(mine - theirs[s]).max() / (np.abs(theirs[s]).max() + 1e-9)))
            nxt = int(theirs[s].argmax())
            greedy.append(int(mine.argmax()) == nxt)
            ids.append(nxt)
    return worst, greedy, text, ids
