"""A Hugging Face model folder written here, independently of Trident: config.json, safetensors
files by the format's spec (8-byte little-endian header length, JSON header of dtype / shape /
data_offsets, the raw bytes), sharded with model.safetensors.index.json as save_pretrained
writes them, and a reader of the same."""
import json
import os
import struct

import numpy as np
import torch


def llama_config(V=320, C=64, L=2, H=4, KV=2, F=96, T=32, **extra):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": C,
         "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
         "max_position_embeddings": T, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
         "attention_bias": False, "tie_word_embeddings": False, "torch_dtype": "float32"}
    c.update(extra)
    return c


def llama_weights(c, seed=0):
    """Random weights of LlamaForCausalLM's names and shapes (nn.Linear: [out, in])."""
    g = torch.Generator().manual_seed(seed)
    C, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c.get("head_dim", C // c["num_attention_heads"])
    kv = c["num_key_value_heads"] * hd

    def r(*shape, scale=0.08):
        return torch.randn(*shape, generator=g) * scale

    w = {"model.embed_tokens.weight": r(V, C, scale=0.5), "model.norm.weight": 1 + r(C, scale=0.1),
         "lm_head.weight": r(V, C)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + r(C, scale=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + r(C, scale=0.1)
        w[p + "self_attn.q_proj.weight"] = r(c["num_attention_heads"] * hd, C)
        w[p + "self_attn.k_proj.weight"] = r(kv, C)
        w[p + "self_attn.v_proj.weight"] = r(kv, C)
        w[p + "self_attn.o_proj.weight"] = r(C, c["num_attention_heads"] * hd)
        w[p + "mlp.gate_proj.weight"] = r(F, C)
        w[p + "mlp.up_proj.weight"] = r(F, C)
        w[p + "mlp.down_proj.weight"] = r(C, F)
    return w


DTYPES = {"F32": ("<f4", 4), "BF16": (None, 2), "F16": ("<f2", 2)}


def tensor_bytes(t, dtype):
    if dtype == "F32":
        return t.contiguous().numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.contiguous().numpy().astype("<f2").tobytes()
    return t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()


def safetensors(tensors, dtype="F32"):
    """The bytes of one safetensors file of tensors {name: torch tensor}, in `dtype`."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def write_folder(path, config, weights, shards=1, dtype="F32"):
    """config.json and the weights, in `shards` files with their index when more than one."""
    os.makedirs(path, exist_ok=True)
    json.dump(config, open(os.path.join(path, "config.json"), "w"), indent=2)
    names = list(weights)
    if shards == 1:
        open(os.path.join(path, "model.safetensors"), "wb").write(safetensors(weights, dtype))
        return
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        f = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        open(os.path.join(path, f), "wb").write(safetensors({n: weights[n] for n in part}, dtype))
        weight_map.update({n: f for n in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
              open(os.path.join(path, "model.safetensors.index.json"), "w"), indent=2)


def raw_tensors(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name != "__metadata__":
            b, e = h["data_offsets"]
            out[name] = (h["dtype"], h["shape"], raw[8 + n + b:8 + n + e])
    return out


def as_float32(dtype, shape, raw):
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return torch.from_numpy(bits.view(np.float32).copy()).reshape(shape)
    return torch.from_numpy(np.frombuffer(raw, dtype=DTYPES[dtype][0]).astype(np.float32)).reshape(shape)
