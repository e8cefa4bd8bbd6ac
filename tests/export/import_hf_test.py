"""trident import: a Hugging Face Llama folder written here (config.json, two safetensors shards
with their index) imports into a checkpoint that `trident generate` runs to the logits of an
independent PyTorch Llama on the same files (Hugging Face's conventions: rotate_half rotary,
repeat_kv), and `trident export` writes back byte-identical weights; a bf16 folder imports to its
exact f32 values; bad folders are refused by name, every problem together, exit 2."""
import json
import os
import shutil
import struct

import torch

from export_common import against_generate, check, finish, hf_llama, run, tmp
from hf_folder import as_float32, llama_config, llama_weights, raw_tensors, safetensors, write_folder

c = llama_config(V=256)  # the byte tokenizer generate decodes with (no tokenizer.json here)
w = llama_weights(c)
src = os.path.join(tmp, "hf")
write_folder(src, c, w, shards=2)
ck = os.path.join(tmp, "ck")
printed = run("import", src, ck).stdout
check("import names what it read", "imported 21 tensors" in printed and "from 2 safetensors files" in printed
      and "Hugging Face Llama names" in printed, printed)


def swiglu(h, p):
    g = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
    return g @ w[p + "mlp.down_proj.weight"].T


worst, greedy, _, _ = against_generate(ck, lambda ids: hf_llama(w, c, ids, swiglu), c["vocab_size"])
check(f"generate on the imported checkpoint = PyTorch Llama on the folder (worst relative error {worst:.2e})",
      worst < 1e-4, worst)
check("same greedy token at every step", all(greedy), greedy)

# import -> export: every tensor's bytes as they were.
out = os.path.join(tmp, "out")
run("export", "--checkpoint", ck, out)
back = raw_tensors(os.path.join(out, "model.safetensors"))
given = {}
for f in os.listdir(src):
    if f.endswith(".safetensors"):
        given.update(raw_tensors(os.path.join(src, f)))
check("export writes back the same tensor names", set(back) == set(given), set(back) ^ set(given))
same = [n for n in given if n in back and back[n] == given[n]]
check(f"import -> export gives byte-identical weights ({len(same)} of {len(given)} tensors)", len(same) == len(given),
      sorted(set(given) - set(same))[:5])

# bf16 weights (one file): imported as their exact f32 values.
src16, ck16, out16 = (os.path.join(tmp, n) for n in ("hf16", "ck16", "out16"))
write_folder(src16, dict(c, torch_dtype="bfloat16"), w, shards=1, dtype="BF16")
printed = run("import", src16, ck16).stdout
check("a bf16 folder imports", "BF16" in printed, printed)
run("export", "--checkpoint", ck16, out16)
back16, given16 = raw_tensors(os.path.join(out16, "model.safetensors")), raw_tensors(os.path.join(src16, "model.safetensors"))
exact = all(torch.equal(as_float32(*back16[n]), as_float32(*given16[n])) for n in given16)
check("bf16 weights widen exactly to f32", exact)


def refused(folder, *needles, extra=()):
    p = run("import", folder, os.path.join(tmp, "never"), *extra, want=2)
    missing = [n for n in needles if n not in p.stderr]
    check(f"refused naming {', '.join(needles)}", not missing and not os.path.exists(os.path.join(tmp, "never")),
          (missing, p.stderr[-1500:]))


# A missing, an extra and a mis-shaped tensor: all three named in one refusal.
bad = os.path.join(tmp, "bad")
ww = dict(w)
del ww["model.layers.1.mlp.up_proj.weight"]
ww["model.layers.0.self_attn.q_norm.weight"] = torch.ones(16)
ww["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(16, 64)
write_folder(bad, c, ww, shards=2)
refused(bad, "no tensor 'model.layers.1.mlp.up_proj.weight'", "tensor 'model.layers.0.self_attn.q_norm.weight'",
        "tensor 'model.layers.0.self_attn.k_proj.weight'", "[16, 64]", "[32, 64]")

# An index naming a tensor its file lacks.
idx = os.path.join(tmp, "idx")
shutil.copytree(src, idx)
m = json.load(open(os.path.join(idx, "model.safetensors.index.json")))
m["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors" if m["weight_map"]["model.norm.weight"].startswith("model-00002") else "model-00002-of-00002.safetensors"
json.dump(m, open(os.path.join(idx, "model.safetensors.index.json"), "w"))
refused(idx, "does not hold it", "model.norm.weight")

# Llama 3.1's rope scaling (original context 16: a 16-wide head's pairs fall in all three bands
# at generate's positions): imported, generates Hugging Face's scaled-rope logits, exports it back.
scaled, ck3, out3 = (os.path.join(tmp, n) for n in ("scaled", "ck3", "out3"))
rope3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 16}
c3 = llama_config(V=256, rope_scaling=rope3)
w3 = llama_weights(c3)
write_folder(scaled, c3, w3)
run("import", scaled, ck3)


def swiglu3(h, p):
    g = torch.nn.functional.silu(h @ w3[p + "mlp.gate_proj.weight"].T) * (h @ w3[p + "mlp.up_proj.weight"].T)
    return g @ w3[p + "mlp.down_proj.weight"].T


worst3, greedy3, _, _ = against_generate(ck3, lambda ids: hf_llama(w3, c3, ids, swiglu3), c3["vocab_size"])
check(f"Llama 3.1 rope scaling: generate = PyTorch Llama with _compute_llama3_parameters (worst relative error "
      f"{worst3:.2e})", worst3 < 1e-5, worst3)
plain3 = dict(c3)
del plain3["rope_scaling"]
worst_plain, _, _, _ = against_generate(ck3, lambda ids: hf_llama(w3, plain3, ids, swiglu3), c3["vocab_size"])
check(f"... and the scaling matters there (unscaled rope: {worst_plain:.2e})", worst_plain > 1e-3, worst_plain)
run("export", "--checkpoint", ck3, out3)
back3 = json.load(open(os.path.join(out3, "config.json")))
check("export writes the rope scaling back", back3.get("rope_scaling") == rope3, back3.get("rope_scaling"))

# GPT-OSS's YaRN (truncate false, no mscale keys: attention factor get_mscale(4) = 1.139 on cos and
# sin) over an original context of 16: imported, generates Hugging Face's logits, exported back
# with every key it reads (mscale 1 / mscale_all_dim 0 read as absent).
yarn_dir, cky, outy = (os.path.join(tmp, n) for n in ("yarn", "cky", "outy"))
ropey = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32.0,
         "beta_slow": 1.0, "truncate": False}
cy = llama_config(V=256, rope_scaling=ropey)
wy = llama_weights(cy)
write_folder(yarn_dir, cy, wy)
run("import", yarn_dir, cky)


def swiglu_y(h, p):
    g = torch.nn.functional.silu(h @ wy[p + "mlp.gate_proj.weight"].T) * (h @ wy[p + "mlp.up_proj.weight"].T)
    return g @ wy[p + "mlp.down_proj.weight"].T


worst_y, _, _, _ = against_generate(cky, lambda ids: hf_llama(wy, cy, ids, swiglu_y), cy["vocab_size"])
check(f"YaRN: generate = PyTorch Llama with _compute_yarn_parameters (worst relative error {worst_y:.2e})",
      worst_y < 1e-5, worst_y)
worst_yp, _, _, _ = against_generate(cky, lambda ids: hf_llama(wy, dict(cy, rope_scaling=None), ids, swiglu_y),
                                     cy["vocab_size"])
check(f"... and yarn matters there (plain rope: {worst_yp:.2e})", worst_yp > 1e-3, worst_yp)
run("export", "--checkpoint", cky, outy)
backy = json.load(open(os.path.join(outy, "config.json")))
check("export writes the yarn scaling back", backy.get("rope_scaling") == dict(ropey, mscale=1.0, mscale_all_dim=0.0),
      backy.get("rope_scaling"))

# What the runtime cannot train yet, by field: linear rope scaling.
lin = os.path.join(tmp, "linear")
cl = llama_config(rope_scaling={"rope_type": "linear", "factor": 4.0})
write_folder(lin, cl, llama_weights(cl))
refused(lin, "rope scaling 'linear'")

# A header whose offsets run past the file, and one whose shape does not match its bytes.
hdr = os.path.join(tmp, "hdr")
shutil.copytree(src16, hdr)
blob = bytearray(safetensors(w))
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
header["lm_head.weight"]["data_offsets"][1] += 1 << 40
header["model.norm.weight"]["shape"] = [2 ** 40, 2 ** 40]
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(os.path.join(hdr, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + blob[8 + n:])
refused(hdr, "'lm_head.weight'", "outside the file's", "'model.norm.weight'")

# An output never replaces anything: an existing checkpoint is refused, left as it was.
before = sorted(os.listdir(ck))
p = run("import", src, ck, want=2)
check("an existing CKPT is refused and kept", "exists" in p.stderr and sorted(os.listdir(ck)) == before, p.stderr)

finish()
