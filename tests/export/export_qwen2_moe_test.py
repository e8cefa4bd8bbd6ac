"""trident export writes a Llama-family mixture of experts that Mixtral's class cannot hold
(shared experts, dense layers, MoE every 2nd layer, unnormalised weights) under Hugging Face's
Qwen2-MoE names + config.json. An independent PyTorch Qwen2-MoE written here the way
Qwen2MoeForCausalLM computes it (Llama's attention with q/k/v biases; a dense layer's SwiGLU MLP
under mlp.; a MoE layer: softmax over the gate's logits, top-k, the weights renormalised only
with norm_topk_prob, SiLU-gated experts, plus the shared expert times sigmoid of its gate;
transformers is not installed), loading the file by those names, gives the logits
`trident generate --logits` dumps, step by step. A model with dense layers and no shared expert
gets Qwen2-MoE's always-present shared expert empty."""
import json
import os

import torch

from export_common import against_generate, check, finish, hf_llama, linear, load_safetensors, run, tmp

E, K, F, C = 8, 2, 24, 64
model = ["--family", "llama", "--layers", "4", "--hidden", str(C), "--heads", "4", "--kv-heads", "2", "--ffn-hidden",
         "96", "--experts", str(E), "--experts-per-token", str(K), "--expert-ffn-hidden", str(F), "--no-moe-drop",
         "--seq-len", "32"]
batch = ["--steps", "8", "--global-batch-size", "8", "--micro-batch-size", "4", "--threads", "1", "--seed", "5"]


def silu_mlp(h, w, p):
    """Hugging Face's SwiGLU MLP: down_proj(silu(gate_proj h) * up_proj h)."""
    return linear(torch.nn.functional.silu(linear(h, w, p + "gate_proj")) * linear(h, w, p + "up_proj"), w,
                  p + "down_proj")


def qwen2_moe_mlp(w, c):
    def mlp(h, layer):
        i = int(layer.split(".")[2])
        p = layer + "mlp."
        if i in c["mlp_only_layers"] or (i + 1) % c["decoder_sparse_step"] != 0:
            return silu_mlp(h, w, p)
        probs = torch.softmax(h @ w[p + "gate.weight"].T, dim=-1)
        top, chosen = torch.topk(probs, c["num_experts_per_tok"], dim=-1)
        if c["norm_topk_prob"]:
            top = top / top.sum(dim=-1, keepdim=True)
        y = torch.zeros_like(h)
        for e in range(c["num_experts"]):
            tokens, slot = torch.where(chosen == e)
            if len(tokens):
                y.index_add_(0, tokens, silu_mlp(h[tokens], w, f"{p}experts.{e}.") * top[tokens, slot, None])
        return y + torch.sigmoid(h @ w[p + "shared_expert_gate.weight"].T) * silu_mlp(h, w, p + "shared_expert.")
    return mlp


def export_and_compare(label, extra, shared_width, normalise):
    ck, out = os.path.join(tmp, "ck-" + label), os.path.join(tmp, "hf-" + label)
    run("train", *model, *extra, *batch, "--checkpoint", ck)
    printed = run("export", "--checkpoint", ck, out).stdout
    check(f"{label}: export names the Qwen2-MoE mapping", "Qwen2-MoE names" in printed, printed)
    w, _ = load_safetensors(os.path.join(out, "model.safetensors"))
    c = json.load(open(os.path.join(out, "config.json")))
    check(f"{label}: config.json is Qwen2-MoE's", c["model_type"] == "qwen2_moe"
          and c["architectures"] == ["Qwen2MoeForCausalLM"]
          and (c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], c["moe_intermediate_size"],
               c["shared_expert_intermediate_size"], c["num_experts"], c["num_experts_per_tok"])
          == (4, C, 96, F, shared_width, E, K), c)
    # --moe-dense-layers 1 --moe-layer-freq 2: layers 1 and 3 route, 0 and 2 stay dense.
    check(f"{label}: mlp_only_layers are the dense layers", c["mlp_only_layers"] == [0, 2]
          and c["decoder_sparse_step"] == 1, c)
    check(f"{label}: norm_topk_prob is --moe-normalise", c["norm_topk_prob"] is normalise, c)
    expected = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for i in range(4):
        p = f"model.layers.{i}."
        expected |= {p + k for k in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                     "self_attn.o_proj.weight")}
        expected |= {p + f"self_attn.{n}_proj.{t}" for n in "qkv" for t in ("weight", "bias")}
        if i in (0, 2):
            expected |= {p + f"mlp.{n}_proj.weight" for n in ("gate", "up", "down")}
            continue
        expected |= {p + "mlp.gate.weight", p + "mlp.shared_expert_gate.weight"}
        expected |= {p + f"mlp.shared_expert.{n}_proj.weight" for n in ("gate", "up", "down")}
        expected |= {p + f"mlp.experts.{j}.{n}_proj.weight" for j in range(E) for n in ("gate", "up", "down")}
    check(f"{label}: exactly Hugging Face Qwen2-MoE's tensor names", set(w) == expected, set(w) ^ expected)
    check(f"{label}: shapes ([out, in]; the shared expert {shared_width} wide)",
          tuple(w["model.layers.1.mlp.gate.weight"].shape) == (E, C)
          and tuple(w["model.layers.1.mlp.experts.5.up_proj.weight"].shape) == (F, C)
          and tuple(w["model.layers.3.mlp.shared_expert.down_proj.weight"].shape) == (C, shared_width)
          and tuple(w["model.layers.3.mlp.shared_expert_gate.weight"].shape) == (1, C)
          and tuple(w["model.layers.2.mlp.gate_proj.weight"].shape) == (96, C))
    worst, greedy, _, _ = against_generate(ck, lambda ids: hf_llama(w, c, ids, qwen2_moe_mlp(w, c)), c["vocab_size"],
                                           steps=8)
    check(f"{label}: PyTorch Qwen2-MoE (HF conventions) logits = trident generate's (worst relative error "
          f"{worst:.2e})", worst < 1e-4, worst)
    check(f"{label}: same greedy token at every step", all(greedy), greedy)
    return w


layers = ["--moe-dense-layers", "1", "--moe-layer-freq", "2"]
w = export_and_compare("shared", [*layers, "--shared-experts", "2", "--no-moe-normalise"], 2 * F, False)
check("the shared expert's gate is zero (sigmoid 1/2, undone by the doubled down projection)",
      float(w["model.layers.1.mlp.shared_expert_gate.weight"].abs().max()) == 0.0)
check("the q/k/v biases Qwen2 always has are zero", all(float(w[f"model.layers.{i}.self_attn.{n}_proj.bias"].abs().max())
                                                         == 0.0 for i in range(4) for n in "qkv"))
export_and_compare("dense-layers", layers, 0, True)
finish()
