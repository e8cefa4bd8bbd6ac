"""trident import / train --init-from / export of a Qwen3-MoE folder written here (config.json of
model_type qwen3_moe, safetensors by Hugging Face's names): heads of head_dim 32 on hidden 64,
QK-norm (self_attn.q_norm / k_norm), rope theta 1e6, rms_norm_eps 1e-6, 8 experts top-2 with
norm_topk_prob under mlp.gate / mlp.experts.j.{gate,up,down}_proj. The imported checkpoint
generates the logits of a PyTorch Qwen3-MoE written here from the public definition
(modeling_qwen3_moe.py: q/k RMSNorm per head before rotate_half RoPE, softmax router, top-k,
weights renormalised); `train --init-from` fine-tunes 20 steps with that model's losses under
torch's AdamW (1e-4 relative); `export` writes back byte-identical weights and Qwen3-MoE's
config; a config Trident cannot train (a dense layer after a MoE one, a key it does not know)
is refused by name."""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import against_generate, check, finish, hf_llama, linear, run, tmp  # noqa: E402
from finetune_reference import Sampler, reference_losses, train_args, trident_losses  # noqa: E402
from hf_folder import llama_config, llama_weights, raw_tensors, write_folder  # noqa: E402
from hf_tokenizer_reference import token_file_ids  # noqa: E402

torch.set_num_threads(1)
E, K, Fe, hd = 8, 2, 32, 32
c = llama_config(V=256, T=32, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", head_dim=hd,
                 rms_norm_eps=1e-6, rope_theta=1e6, moe_intermediate_size=Fe, num_experts=E, num_experts_per_tok=K,
                 norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=0.0,
                 output_router_logits=False, use_sliding_window=False, sliding_window=None, max_window_layers=2,
                 attention_dropout=0.0)
del c["attention_bias"]
w = llama_weights(c, seed=7)
g = torch.Generator().manual_seed(8)
C = c["hidden_size"]
for i in range(c["num_hidden_layers"]):
    p = f"model.layers.{i}."
    for n in ("gate", "up", "down"):
        del w[p + f"mlp.{n}_proj.weight"]  # every layer a MoE layer
    w[p + "self_attn.q_norm.weight"] = 1 + torch.randn(hd, generator=g) * 0.2
    w[p + "self_attn.k_norm.weight"] = 1 + torch.randn(hd, generator=g) * 0.2
    w[p + "mlp.gate.weight"] = torch.randn(E, C, generator=g) * 0.3
    for e in range(E):
        w[p + f"mlp.experts.{e}.gate_proj.weight"] = torch.randn(Fe, C, generator=g) * 0.08
        w[p + f"mlp.experts.{e}.up_proj.weight"] = torch.randn(Fe, C, generator=g) * 0.08
        w[p + f"mlp.experts.{e}.down_proj.weight"] = torch.randn(C, Fe, generator=g) * 0.08
src = os.path.join(tmp, "hf")
write_folder(src, c, w, shards=2)
ck = os.path.join(tmp, "ck")
printed = run("import", src, ck).stdout
check("import reads the folder as Qwen3-MoE", "Hugging Face Qwen3-MoE names" in printed, printed)


def silu_mlp(h, w, p):
    return linear(F.silu(linear(h, w, p + "gate_proj")) * linear(h, w, p + "up_proj"), w, p + "down_proj")


def qwen3_moe_mlp(w):
    """Qwen3MoeSparseMoeBlock: softmax over the experts' logits, top-k, renormalised (norm_topk_prob)."""
    def mlp(h, layer):
        p = layer + "mlp."
        probs = torch.softmax(h @ w[p + "gate.weight"].T, dim=-1)
        top, chosen = torch.topk(probs, K, dim=-1)
        top = top / top.sum(dim=-1, keepdim=True)
        y = torch.zeros_like(h)
        for e in range(E):
            tokens, slot = torch.where(chosen == e)
            if len(tokens):
                y = y.index_add(0, tokens, silu_mlp(h[tokens], w, f"{p}experts.{e}.") * top[tokens, slot, None])
        return y
    return mlp


worst, greedy, _, _ = against_generate(ck, lambda ids: hf_llama(w, c, ids, qwen3_moe_mlp(w)), c["vocab_size"])
check(f"generate on the imported checkpoint = PyTorch Qwen3-MoE on the folder (worst relative error {worst:.2e})",
      worst < 1e-4, worst)
check("same greedy token at every step", all(greedy), greedy)

# import -> export: every tensor's bytes as they were, and Qwen3-MoE's config.
out = os.path.join(tmp, "out")
run("export", "--checkpoint", ck, out)
back = raw_tensors(os.path.join(out, "model.safetensors"))
given = {}
for f in os.listdir(src):
    if f.endswith(".safetensors"):
        given.update(raw_tensors(os.path.join(src, f)))
same = [n for n in given if n in back and back[n] == given[n]]
check(f"import -> export gives byte-identical weights ({len(same)} of {len(given)} tensors)",
      len(same) == len(given) and set(back) == set(given), sorted(set(given) ^ set(back))[:5])
cfg = json.load(open(os.path.join(out, "config.json")))
check("export writes Qwen3-MoE's config", all(cfg.get(k) == c[k] for k in (
    "model_type", "head_dim", "rms_norm_eps", "rope_theta", "num_experts", "num_experts_per_tok",
    "moe_intermediate_size", "norm_topk_prob", "mlp_only_layers", "decoder_sparse_step")), cfg)

# Fine-tune 20 steps from the imported weights on a byte corpus (token = byte, V 256).
text = ("The quick brown fox jumps over the lazy dog. " * 40 + "Pack my box with five dozen liquor jugs. " * 40)
data_txt, data = os.path.join(tmp, "corpus.txt"), os.path.join(tmp, "corpus.tokens")
open(data_txt, "w").write(text)
run("data", "prepare", data_txt, data)
steps, B, b, seed = 20, 4, 2, 3
opt = {"lr": 1e-3, "min_lr": 1e-4, "warmup": 2, "weight_decay": 0.1, "grad_clip": 1.0, "beta1": 0.9, "beta2": 0.95,
       "eps": 1e-8}
ref = reference_losses(w, lambda p, x, y: F.cross_entropy(hf_llama(p, c, x, qwen3_moe_mlp(p)), y),
                       Sampler(token_file_ids(data), c["max_position_embeddings"], seed), steps, B, b, opt)
# The router as imported (norm_topk_prob, no dropping); Hugging Face trains without the aux loss here.
args = train_args(ck, data, steps, B, b, seed, opt) + ["--moe-aux-loss-coeff", "0"]
losses = trident_losses(sys.argv[1], args, os.path.join(tmp, "one.jsonl"))
rel = max(abs(a - r) / abs(r) for a, r in zip(losses, ref)) if len(losses) == steps else float("inf")
print("trident:  ", " ".join(f"{x:.5f}" for x in losses))
print("reference:", " ".join(f"{x:.5f}" for x in ref))
check(f"train --init-from: 20 losses = the PyTorch Qwen3-MoE's (worst relative error {rel:.1e})", rel < 1e-4, rel)
check("the fine-tune learns (last loss below the first)", ref[-1] < ref[0] - 0.05, ref)


def refused(config, *needles):
    folder = os.path.join(tmp, "refused")
    write_folder(folder, config, w)
    p = run("import", folder, os.path.join(tmp, "never"), want=2)
    missing = [n for n in needles if n not in p.stderr]
    check(f"refused naming {', '.join(needles)}", not missing and not os.path.exists(os.path.join(tmp, "never")),
          (missing, p.stderr[-1500:]))


refused(dict(c, mlp_only_layers=[1]), "mlp_only_layers")
refused(dict(c, qk_magic=3), "qk_magic")
finish()
