"""trident import / generate / train --init-from / export of a DeepSeek-V3 folder written here
(config.json of model_type deepseek_v3, safetensors by the released checkpoint's names, a
tokenizer.json): multi-head latent attention with q_lora (q_a_proj / q_a_layernorm / q_b_proj,
kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj), a first dense layer (first_k_dense_replace 1), a
MoE layer of 8 experts in 4 groups, top-4 within the best 2 (noaux_tc), a shared expert, the
sigmoid router with e_score_correction_bias, normalised and x 2.5, and one MTP layer at
model.layers.2 (enorm, hnorm, eh_proj, shared_head.norm, shared_head.head = lm_head, embed_tokens).
generate's logits = DeepseekV3ForCausalLM written from modeling_deepseek.py
(tests/reference/deepseek_reference.py) to 1e-5 of their largest magnitude; 20 fine-tune steps =
that model's losses (main and MTP, weighted 0.3) under torch's AdamW with the expert bias moved
after each step as Megatron-Core moves it (1e-4 relative); export writes back every tensor
byte-identical and a config.json that imports again; what the runtime computes otherwise is
refused by name."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "reference"))
from deepseek_reference import hf_deepseek_v3  # noqa: E402
from export_common import check, finish, run, tmp, trident  # noqa: E402
from finetune_reference import Sampler, reference_losses, train_args, trident_losses  # noqa: E402
from hf_folder import raw_tensors, write_folder  # noqa: E402
import hf_tokenizer_reference as ref  # noqa: E402
from hf_tokenizer_reference import corpus, token_file_ids  # noqa: E402

torch.set_num_threads(1)
text = corpus(12000)
tok = ref.Tokenizer(ref.train(text, ref.LLAMA3_PATTERN, 60), ["<|begin_of_text|>", "<|end_of_text|>"],
                    ref.LLAMA3_PATTERN, ignore_merges=True)
V, C, L, H, T, E, K, Fe, Fd = len(tok.vocab) + len(tok.added) + 2, 64, 2, 4, 32, 8, 4, 32, 96
c = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": V, "hidden_size": C,
     "intermediate_size": Fd, "moe_intermediate_size": Fe, "num_hidden_layers": L, "num_nextn_predict_layers": 1,
     "num_attention_heads": H, "num_key_value_heads": H, "n_shared_experts": 1, "n_routed_experts": E,
     "routed_scaling_factor": 2.5, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "v_head_dim": 16,
     "qk_nope_head_dim": 16, "topk_method": "noaux_tc", "n_group": 4, "topk_group": 2, "num_experts_per_tok": K,
     "moe_layer_freq": 1, "first_k_dense_replace": 1, "norm_topk_prob": True, "scoring_func": "sigmoid",
     "aux_loss_alpha": 0.001, "seq_aux": True, "hidden_act": "silu", "max_position_embeddings": T,
     "initializer_range": 0.02, "rms_norm_eps": 1e-6, "use_cache": True, "pretraining_tp": 1, "tie_word_embeddings": False,
     "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
     "torch_dtype": "float32", "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1}
g = torch.Generator().manual_seed(11)


def r(*shape, scale=0.08):
    return torch.randn(*shape, generator=g) * scale


def norm(n):
    return 1 + r(n, scale=0.1)


def layer(p, moe):
    w = {p + "input_layernorm.weight": norm(C), p + "post_attention_layernorm.weight": norm(C),
         p + "self_attn.q_a_proj.weight": r(32, C), p + "self_attn.q_a_layernorm.weight": norm(32),
         p + "self_attn.q_b_proj.weight": r(H * 24, 32, scale=0.15),
         p + "self_attn.kv_a_proj_with_mqa.weight": r(16 + 8, C), p + "self_attn.kv_a_layernorm.weight": norm(16),
         p + "self_attn.kv_b_proj.weight": r(H * 32, 16, scale=0.15), p + "self_attn.o_proj.weight": r(C, H * 16)}
    if not moe:
        return {**w, p + "mlp.gate_proj.weight": r(Fd, C), p + "mlp.up_proj.weight": r(Fd, C),
                p + "mlp.down_proj.weight": r(C, Fd)}
    w[p + "mlp.gate.weight"] = r(E, C, scale=0.3)
    w[p + "mlp.gate.e_score_correction_bias"] = r(E, scale=0.15)  # enough to change choices
    for e in range(E):
        for n, shape in (("gate", (Fe, C)), ("up", (Fe, C)), ("down", (C, Fe))):
            w[p + f"mlp.experts.{e}.{n}_proj.weight"] = r(*shape)
    for n, shape in (("gate", (Fe, C)), ("up", (Fe, C)), ("down", (C, Fe))):
        w[p + f"mlp.shared_experts.{n}_proj.weight"] = r(*shape)
    return w


w = {"model.embed_tokens.weight": r(V, C, scale=0.5)}
w.update(layer("model.layers.0.", False))
w.update(layer("model.layers.1.", True))
mtp = "model.layers.2."
w.update({mtp + "embed_tokens.weight": w["model.embed_tokens.weight"].clone(), mtp + "enorm.weight": norm(C),
          mtp + "hnorm.weight": norm(C), mtp + "eh_proj.weight": r(C, 2 * C), mtp + "shared_head.norm.weight": norm(C)})
w.update(layer(mtp, True))
w.update({"model.norm.weight": norm(C), "lm_head.weight": r(V, C)})
w[mtp + "shared_head.head.weight"] = w["lm_head.weight"].clone()
src = os.path.join(tmp, "hf")
write_folder(src, c, w, shards=2)
open(os.path.join(src, "tokenizer.json"), "w", encoding="utf-8").write(tok.json())

ck = os.path.join(tmp, "ck")
printed = run("import", src, ck).stdout
check("import reads the folder as DeepSeek-V3", "Hugging Face DeepSeek-V3 names" in printed, printed)
check("import reads the tokenizer", "byte-level BPE" in printed, printed)



def against_generate(ck, w, c, what):
    """generate: the prompt through the imported tokenizer, 4 greedy steps, each step's logits."""
    prompt, steps_gen = "It's 12:30, time for a walk. ", 4
    logits_file = os.path.join(tmp, "logits.bin")
    run("generate", "--checkpoint", ck, "--prompt", prompt, "--tokens", str(steps_gen), "--top-k", "1",
        "--logits", logits_file)
    theirs = np.fromfile(logits_file, dtype="<f4").reshape(steps_gen, V)
    ids, worst, greedy = tok.encode(prompt), 0.0, []
    with torch.no_grad():
        for s in range(steps_gen):
            mine = hf_deepseek_v3(w, c, torch.tensor(ids))[0][-1].numpy()
            worst = max(worst, float(np.abs(mine - theirs[s]).max() / np.abs(mine).max()))
            greedy.append(int(mine.argmax()) == int(theirs[s].argmax()))
            ids.append(int(theirs[s].argmax()))
    check(f"generate = PyTorch DeepseekV3ForCausalLM on the folder{what} (worst logits error {worst:.2e} of the "
          "largest)", worst < 1e-5, worst)
    check(f"same greedy token at every step{what}", all(greedy), greedy)


def exported_identical(src, ck, out, what):
    """import -> export: every tensor's bytes as they were."""
    run("export", "--checkpoint", ck, out)
    back = raw_tensors(os.path.join(out, "model.safetensors"))
    given = {}
    for f in os.listdir(src):
        if f.endswith(".safetensors"):
            given.update(raw_tensors(os.path.join(src, f)))
    same = [n for n in given if n in back and back[n] == given[n]]
    check(f"import -> export gives byte-identical weights{what} ({len(same)} of {len(given)} tensors)",
          len(same) == len(given) and set(back) == set(given), sorted(set(given) ^ set(back))[:5])


against_generate(ck, w, c, "")
# The config imports again to the same checkpoint.
out = os.path.join(tmp, "out")
exported_identical(src, ck, out, "")
cfg = json.load(open(os.path.join(out, "config.json")))
keys = ("model_type", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace",
        "topk_method", "n_group", "topk_group", "scoring_func", "norm_topk_prob", "routed_scaling_factor",
        "num_nextn_predict_layers", "rms_norm_eps", "rope_theta")
check("export writes DeepSeek-V3's config", all(cfg.get(k) == c[k] for k in keys),
      {k: (cfg.get(k), c[k]) for k in keys if cfg.get(k) != c[k]})
run("import", out, os.path.join(tmp, "ck2"))
out2 = os.path.join(tmp, "out2")
run("export", "--checkpoint", os.path.join(tmp, "ck2"), out2)
check("the exported folder imports and exports again byte-identical (weights and config.json)",
      open(os.path.join(out2, "model.safetensors"), "rb").read() == open(os.path.join(out, "model.safetensors"), "rb").read()
      and open(os.path.join(out2, "config.json")).read() == open(os.path.join(out, "config.json")).read())

# Fine-tune 20 steps from the imported weights (the MTP copies of embed_tokens / lm_head are the
# model's: one parameter each), the expert bias moved by 0.01 sign(mean load - load) after each step.
data_txt, data = os.path.join(tmp, "corpus.txt"), os.path.join(tmp, "corpus.tokens")
open(data_txt, "w", encoding="utf-8", newline="").write(text)
run("data", "prepare", data_txt, data, "--tokenizer", ck)
steps, B, b, seed, scaling, rate = 20, 4, 2, 3, 0.3, 0.01
opt = {"lr": 1e-3, "min_lr": 1e-4, "warmup": 2, "weight_decay": 0.1, "grad_clip": 1.0, "beta1": 0.9, "beta2": 0.95,
       "eps": 1e-8}
tied = {mtp + "embed_tokens.weight": "model.embed_tokens.weight", mtp + "shared_head.head.weight": "lm_head.weight"}
params = {n: t for n, t in w.items() if n not in tied and "e_score_correction_bias" not in n}
bias = {i: w[f"model.layers.{i}.mlp.gate.e_score_correction_bias"].clone() for i in (1, 2)}
loads, mtp_ref, step_mtp = {}, [], []


def loss_of(p, x, y):
    full = dict(p, **{n: p[of] for n, of in tied.items()})
    logits, (lk,) = hf_deepseek_v3(full, c, x, bias, loads)
    main, extra = F.cross_entropy(logits, y), F.cross_entropy(lk[:T - 1], y[1:])
    step_mtp.append(extra.item())
    # The objective: main + 0.3 / D x the depths'; the step's main loss is what reference_losses logs.
    return main + scaling * extra - (scaling * extra).detach()


def objective(p, x, y):
    return loss_of(p, x, y)


def after_step():
    for i, load in loads.items():  # Megatron-Core's get_updated_expert_bias
        bias[i] += torch.sign(load.sum().double() / E - load.double()).float() * rate
    loads.clear()
    mtp_ref.append(sum(step_mtp) / len(step_mtp))
    step_mtp.clear()


ref_losses = reference_losses(params, objective, Sampler(token_file_ids(data), T, seed), steps, B, b, opt,
                              after_step=after_step)
args = train_args(ck, data, steps, B, b, seed, opt) + [
    "--moe-aux-loss-coeff", "0", "--mtp-loss-scaling-factor", str(scaling), "--moe-router-bias-update-rate", str(rate)]
metrics = os.path.join(tmp, "one.jsonl")
losses = trident_losses(trident, args, metrics)
mtp_losses = [json.loads(line).get("mtp_1_loss") for line in open(metrics) if '"step"' in line and '"loss"' in line]
rel = max(abs(a - r) / abs(r) for a, r in zip(losses, ref_losses)) if len(losses) == steps else float("inf")
rel_mtp = (max(abs(a - r) / abs(r) for a, r in zip(mtp_losses, mtp_ref))
           if len(mtp_losses) == steps and None not in mtp_losses else float("inf"))
print("trident:      ", " ".join(f"{x:.5f}" for x in losses))
print("reference:    ", " ".join(f"{x:.5f}" for x in ref_losses))
print("trident mtp:  ", " ".join(f"{x:.5f}" for x in mtp_losses if x is not None))
print("reference mtp:", " ".join(f"{x:.5f}" for x in mtp_ref))
check(f"train --init-from: 20 main losses = PyTorch DeepSeek-V3's (worst relative error {rel:.1e})", rel < 1e-4, rel)
check(f"train --init-from: 20 MTP losses = PyTorch DeepSeek-V3's (worst relative error {rel_mtp:.1e})",
      rel_mtp < 1e-4, rel_mtp)
check("the fine-tune learns (last loss below the first)", ref_losses[-1] < ref_losses[0] - 0.05, ref_losses)

# q_lora_rank null: the queries by self_attn.q_proj (DeepSeek-V2-Lite's attention).
c_q = dict(c, q_lora_rank=None)
w_q = {n: t for n, t in w.items() if ".q_a_" not in n and ".q_b_" not in n}
for i in range(3):
    w_q[f"model.layers.{i}.self_attn.q_proj.weight"] = r(H * 24, C)
src_q, ck_q = os.path.join(tmp, "hf_q"), os.path.join(tmp, "ck_q")
write_folder(src_q, c_q, w_q)
open(os.path.join(src_q, "tokenizer.json"), "w", encoding="utf-8").write(tok.json())
run("import", src_q, ck_q)
against_generate(ck_q, w_q, c_q, " with q_proj (q_lora_rank null)")
exported_identical(src_q, ck_q, os.path.join(tmp, "out_q"), " with q_proj")

# DeepSeek-V3's YaRN (mscale = mscale_all_dim = 1: cos/sin x 1, the softmax scale x get_mscale(4)^2)
# over an original context of 8, so the prompt's positions reach the interpolated pairs: generate =
# modeling_deepseek's, the weights and the rope_scaling written back as given.
yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "truncate": True}
c_y, src_y, ck_y, out_y = dict(c, rope_scaling=yarn), *(os.path.join(tmp, n) for n in ("hf_y", "ck_y", "out_y"))
write_folder(src_y, c_y, w)
open(os.path.join(src_y, "tokenizer.json"), "w", encoding="utf-8").write(tok.json())
run("import", src_y, ck_y)
against_generate(ck_y, w, c_y, " with yarn")
exported_identical(src_y, ck_y, out_y, " with yarn")
back_y = json.load(open(os.path.join(out_y, "config.json")))
check("export writes the yarn rope_scaling back as given", back_y.get("rope_scaling") == yarn, back_y.get("rope_scaling"))
with torch.no_grad():
    ids_y = torch.tensor(tok.encode("It's 12:30, time for a walk. "))
    a, b_ = hf_deepseek_v3(w, c_y, ids_y)[0], hf_deepseek_v3(w, c, ids_y)[0]
    diff = float((a - b_).abs().max() / a.abs().max())
check(f"... and yarn matters there (without it the logits differ by {diff:.2e} of the largest)", diff > 1e-3, diff)


def refused(config, *needles, weights=None):
    folder = os.path.join(tmp, "refused")
    write_folder(folder, config, weights or w)
    p = run("import", folder, os.path.join(tmp, "never"), want=2)
    missing = [n for n in needles if n not in p.stderr]
    check(f"refused naming {', '.join(needles)}", not missing and not os.path.exists(os.path.join(tmp, "never")),
          (missing, p.stderr[-1500:]))


refused(dict(c, moe_layer_freq=2), "moe_layer_freq")
refused(dict(c, num_experts_per_tok=2), "num_experts_per_tok", "topk_group")  # HF ranks groups by their top 2
refused(dict(c, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8}), "rope_scaling", "llama3")
refused(dict(c, rope_scaling=dict(yarn, attention_factor=2.0)), "attention_factor 2 differs")
refused(dict(c, attention_bias=True), "attention_bias")
refused(dict(c, rms_norm_eps=1e-5), "rms_norm_eps")
refused(dict(c, scoring_func="softmax"), "scoring_func")
refused(dict(c, rope_interleave=False), "rope_interleave")
other = dict(w, **{mtp + "shared_head.head.weight": w["lm_head.weight"] * 1.5})
refused(c, "model.layers.2.shared_head.head.weight", "lm_head.weight", weights=other)
finish()
