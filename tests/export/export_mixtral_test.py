"""trident export writes a Llama-family mixture of experts under Hugging Face's Mixtral names +
config.json: an independent PyTorch Mixtral written here the way Hugging Face's
MixtralForCausalLM computes it (Llama's attention and norms; per layer a linear gate, softmax
over the router logits, the top-2 experts, their weights renormalised, SiLU-gated experts summed
by those weights; transformers is not installed), loading the file by those names, gives the
logits `trident generate --logits` dumps, step by step, and the same greedy tokens. What
Mixtral's class cannot hold goes to Qwen2-MoE's names; what no class computes is refused by name
(exit 2).

With MPIRUN as the second argument it checks instead that a checkpoint written under mpirun at
ep 2 (dp 2, each rank holding 4 of the 8 experts) exports the one-process run's tensors."""
import json
import os
import subprocess
import sys

import torch

from export_common import against_generate, check, finish, hf_llama, load_safetensors, run, tmp

E, K, F = 8, 2, 48
# 8 experts, top-2, no dropping; 4 query heads sharing 2 kv heads. The z-loss only shapes
# training: such a checkpoint exports.
model = ["--family", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--ffn-hidden",
         "96", "--experts", str(E), "--experts-per-token", str(K), "--expert-ffn-hidden", str(F), "--no-moe-drop",
         "--moe-z-loss-coeff", "0.001", "--seq-len", "32"]
# Micro-batches of 4 in both runs: the auxiliary losses count one micro-batch's tokens.
batch = ["--steps", "8", "--global-batch-size", "8", "--micro-batch-size", "4", "--threads", "1", "--seed", "3"]
ck, out = os.path.join(tmp, "ck"), os.path.join(tmp, "hf")
run("train", *model, *batch, "--checkpoint", ck)
printed = run("export", "--checkpoint", ck, out).stdout
check("export names the Mixtral mapping", "Mixtral names" in printed, printed)
w, _ = load_safetensors(os.path.join(out, "model.safetensors"))


def names(layers, experts):
    expected = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for i in range(layers):
        for k in ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                  "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                  "block_sparse_moe.gate.weight"):
            expected.add(f"model.layers.{i}.{k}")
        for j in range(experts):
            for m in ("w1", "w2", "w3"):
                expected.add(f"model.layers.{i}.block_sparse_moe.experts.{j}.{m}.weight")
    return expected


if len(sys.argv) > 2:  # the ep 2 checkpoint
    mpirun, ck2, out2 = sys.argv[2], os.path.join(tmp, "ck-ep2"), os.path.join(tmp, "hf-ep2")
    p = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", sys.argv[1],
                        "train", *model, *batch, "--dp", "2", "--ep", "2", "--checkpoint", ck2],
                       capture_output=True, text=True, timeout=300)
    check("mpirun -np 2 train --dp 2 --ep 2 wrote a checkpoint", p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:])
    layout = json.load(open(os.path.join(ck2, "manifest.json")))["meta"]["written_by_layout"]
    check("the checkpoint was written at ep 2", layout.get("ep") == 2, layout)
    run("export", "--checkpoint", ck2, out2)
    w2, _ = load_safetensors(os.path.join(out2, "model.safetensors"))
    check("the same tensor names", set(w2) == set(w), set(w2) ^ set(w))
    # dp 2 sums the gradients in another order: equal to float rounding, not bit for bit.
    worst = max(float((w[n] - w2[n]).abs().max() / (w[n].abs().max() + 1e-12)) for n in w if n in w2)
    check(f"ep 2's export = one process's (worst relative difference {worst:.2e})", worst < 1e-5, worst)
    finish()

c = json.load(open(os.path.join(out, "config.json")))
check("config.json is Mixtral's", c["model_type"] == "mixtral" and c["architectures"] == ["MixtralForCausalLM"]
      and (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
           c["intermediate_size"], c["num_local_experts"], c["num_experts_per_tok"]) == (2, 64, 4, 2, F, E, K), c)
# Hugging Face's loss sums the k choices: Trident's default 0.01 over k = 2.
check("router_aux_loss_coef is Trident's coefficient over k", abs(c["router_aux_loss_coef"] - 0.01 / K) < 1e-12, c)
expected = names(2, E)
check("exactly Hugging Face Mixtral's tensor names", set(w) == expected, set(w) ^ expected)
check("nn.Linear shapes ([out, in])", tuple(w["model.layers.0.block_sparse_moe.gate.weight"].shape) == (E, 64)
      and tuple(w["model.layers.0.block_sparse_moe.experts.3.w1.weight"].shape) == (F, 64)
      and tuple(w["model.layers.0.block_sparse_moe.experts.3.w3.weight"].shape) == (F, 64)
      and tuple(w["model.layers.0.block_sparse_moe.experts.3.w2.weight"].shape) == (64, F))


def moe(h, layer):
    """MixtralSparseMoeBlock: softmax over the gate's logits, top-k, the chosen weights over their
    sum, each expert w2(silu(w1 x) * w3 x) on its tokens, added back weighted."""
    p = layer + "block_sparse_moe."
    probs = torch.softmax(h @ w[p + "gate.weight"].T, dim=-1)
    top, chosen = torch.topk(probs, c["num_experts_per_tok"], dim=-1)
    top = top / top.sum(dim=-1, keepdim=True)
    y = torch.zeros_like(h)
    for e in range(c["num_local_experts"]):
        tokens, slot = torch.where(chosen == e)
        if len(tokens) == 0:
            continue
        x, q = h[tokens], f"{p}experts.{e}."
        g = torch.nn.functional.silu(x @ w[q + "w1.weight"].T) * (x @ w[q + "w3.weight"].T)
        y.index_add_(0, tokens, (g @ w[q + "w2.weight"].T) * top[tokens, slot, None])
    return y


worst, greedy, _, _ = against_generate(ck, lambda ids: hf_llama(w, c, ids, moe), c["vocab_size"], steps=8)
check(f"PyTorch Mixtral (HF conventions) logits = trident generate's (worst relative error {worst:.2e})", worst < 1e-4,
      worst)
check("same greedy token at every step", all(greedy), greedy)

# What MixtralForCausalLM cannot compute goes to Qwen2-MoE's names instead (its logits are
# export_qwen2_moe_test's); a setting no class computes is refused by name (exit 2).
small = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "32", "--steps", "1", "--global-batch-size",
         "4", "--micro-batch-size", "4", "--threads", "1", "--experts", "4", "--experts-per-token", "2",
         "--expert-ffn-hidden", "32"]
for label, extra in (("dense layers", ["--moe-dense-layers", "1"]), ("MoE every 2nd layer", ["--moe-layer-freq", "2"]),
                     ("unnormalised weights", ["--no-moe-normalise"]), ("shared experts", ["--shared-experts", "1"])):
    odd = os.path.join(tmp, "ck-" + label.replace(" ", "-"))
    run("train", *small, "--family", "llama", *extra, "--checkpoint", odd)
    p = run("export", "--checkpoint", odd, odd + "-hf")
    check(f"{label}: exported under Qwen2-MoE's names, not Mixtral's", "Qwen2-MoE names" in p.stdout
          and json.load(open(os.path.join(odd + "-hf", "config.json")))["model_type"] == "qwen2_moe", p.stdout)


def edited(meta_edit, name):
    """A copy of the checkpoint whose meta says what train does not write (another score
    function), as another writer's checkpoint might."""
    copy = os.path.join(tmp, name)
    subprocess.run(["cp", "-r", ck, copy], check=True)
    path = os.path.join(copy, "manifest.json")
    manifest = json.load(open(path))
    meta_edit(manifest["meta"])
    json.dump(manifest, open(path, "w"))
    return copy


sigmoid = edited(lambda m: m["router"].update(scores="sigmoid"), "ck-sigmoid")
p = run("export", "--checkpoint", sigmoid, os.path.join(tmp, "hf-sigmoid"), want=2)
check("export refuses a sigmoid router by name", "'sigmoid' (meta.router.scores)" in p.stderr, p.stderr)
gpt = os.path.join(tmp, "ck-gpt")
run("train", *small, "--checkpoint", gpt)
p = run("export", "--checkpoint", gpt, os.path.join(tmp, "hf-gpt"), want=2)
check("export refuses a GPT-family mixture of experts by name", "GPT-family mixture of experts" in p.stderr
      and "--family llama" in p.stderr, p.stderr)

finish()
