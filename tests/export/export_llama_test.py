"""trident export writes a Llama checkpoint under Hugging Face's Llama names + config.json: an
independent PyTorch Llama written here the way Hugging Face's LlamaForCausalLM computes it
(rotate_half rotary embeddings, repeat_kv grouped-query attention, RMSNorm, SiLU-gated MLP,
untied head; transformers is not installed), loading the file by those names, gives the logits
`trident generate --logits` dumps, step by step, and the same greedy tokens."""
import json
import os

import torch

from export_common import against_generate, check, finish, hf_llama, load_safetensors, run, tmp


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


def swiglu(h, p):
    g = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
    return g @ w[p + "mlp.down_proj.weight"].T


worst, greedy, _, _ = against_generate(ck, lambda ids: hf_llama(w, c, ids, swiglu), c["vocab_size"])
check(f"PyTorch Llama (HF conventions) logits = trident generate's (worst relative error {worst:.2e})", worst < 1e-4,
      worst)
check("same greedy token at every step", all(greedy), greedy)

finish()
