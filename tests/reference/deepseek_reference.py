"""DeepSeek-V3's multi-head latent attention written from Hugging Face's modeling_deepseek.py
(DeepseekV3Attention, DeepseekV3RotaryEmbedding, apply_rotary_pos_emb), for the reference test
and the import test. The rope is HF's: q_pe and k_pe de-interleaved (view d/2, 2 -> transpose)
and rotated by rotate_half with cos/sin of cat(freqs, freqs), on the weights as HF stores them."""
import math

import torch
import torch.nn as nn

from yarn_reference import deepseek_softmax_multiplier, hf_yarn_parameters, is_yarn


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    b, h, s, d = q.shape
    q = q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    b, h, s, d = k.shape
    k = k.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class MLA(nn.Module):
    """cfg: heads, q_lora_rank (0: q_proj), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
    v_head_dim, rope_theta, norm_eps."""

    def __init__(self, C, cfg):
        super().__init__()
        self.nh, self.qr, self.kvr = cfg["heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
        self.dn, self.dr, self.dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.theta, eps = cfg["rope_theta"], cfg.get("norm_eps", 1e-6)
        qd = self.dn + self.dr
        if self.qr > 0:
            self.q_a_proj = nn.Linear(C, self.qr, bias=False)
            self.q_a_layernorm = RMSNorm(self.qr, eps)
            self.q_b_proj = nn.Linear(self.qr, self.nh * qd, bias=False)
        else:
            self.q_proj = nn.Linear(C, self.nh * qd, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(C, self.kvr + self.dr, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kvr, eps)
        self.kv_b_proj = nn.Linear(self.kvr, self.nh * (self.dn + self.dv), bias=False)
        self.o_proj = nn.Linear(self.nh * self.dv, C, bias=False)
        # YaRN (DeepSeek-V3's rope_scaling): the softmax scale x mscale^2 (DeepseekV3Attention).
        self.rope_scaling = cfg.get("rope_scaling")
        self.softmax_scale = qd ** -0.5 * deepseek_softmax_multiplier(self.rope_scaling)

    def rope(self, T):
        return hf_rope(T, self.dr, self.theta, self.rope_scaling)

    def forward(self, h):
        B, T, _ = h.shape
        qd = self.dn + self.dr
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(h))) if self.qr > 0 else self.q_proj(h)
        q = q.view(B, T, self.nh, qd).transpose(1, 2)
        q_nope, q_pe = torch.split(q, [self.dn, self.dr], dim=-1)
        ckv = self.kv_a_proj_with_mqa(h)
        ckv, k_pe = torch.split(ckv, [self.kvr, self.dr], dim=-1)
        k_pe = k_pe.view(B, T, 1, self.dr).transpose(1, 2)
        kv = self.kv_b_proj(self.kv_a_layernorm(ckv)).view(B, T, self.nh, self.dn + self.dv).transpose(1, 2)
        k_nope, v = torch.split(kv, [self.dn, self.dv], dim=-1)
        cos, sin = self.rope(T)
        q_pe, k_pe = apply_rotary_pos_emb(q_pe, k_pe, cos, sin)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(B, self.nh, T, self.dr)], dim=-1)
        att = (q @ k.transpose(-2, -1)) * self.softmax_scale
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.nh * self.dv)
        return self.o_proj(y)

    def trident_names(self, p):
        out = {p + "kv_a_w": self.kv_a_proj_with_mqa.weight, p + "kv_a_norm_w": self.kv_a_layernorm.weight,
               p + "kv_b_w": self.kv_b_proj.weight, p + "attn_proj_w": self.o_proj.weight}
        if self.qr > 0:
            out.update({p + "q_a_w": self.q_a_proj.weight, p + "q_a_norm_w": self.q_a_layernorm.weight,
                        p + "q_b_w": self.q_b_proj.weight})
        else:
            out[p + "q_w"] = self.q_proj.weight
        return out


# DeepseekV3ForCausalLM by Hugging Face's names, functional (weights {name: tensor}) for the import
# test: modeling_deepseek.py's layers (MLA above, DeepseekV3MLP, MoEGate's noaux_tc, DeepseekV3MoE)
# and the released checkpoint's MTP layers at model.layers.{L + j} (DeepSeek-V3 section 2.2,
# Megatron-Core's MultiTokenPredictionLayer: ids rolled by the depth, 0 rolled in).

def rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def hf_rope(T, dr, theta, rope_scaling=None):
    """cos / sin of cat(freqs, freqs); with YaRN Hugging Face's frequencies and attention factor."""
    inv_freq, attn = 1.0 / (theta ** (torch.arange(0, dr, 2, dtype=torch.float64) / dr)), 1.0
    if is_yarn(rope_scaling):
        inv_freq, attn = hf_yarn_parameters(rope_scaling, theta, dr)
        inv_freq = inv_freq.double()
    emb = torch.cat((torch.outer(torch.arange(T, dtype=torch.float64), inv_freq),) * 2, dim=-1)
    return (emb.cos() * attn).float(), (emb.sin() * attn).float()


def hf_mla(w, c, p, h):
    """DeepseekV3Attention on rows h [T, C]; q_a_layernorm / kv_a_layernorm at RMSNorm's default 1e-6."""
    T, nh = h.shape[0], c["num_attention_heads"]
    dn, dr, dv, kvr = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    a = p + "self_attn."
    if c.get("q_lora_rank"):
        q = rms(h @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], 1e-6) @ w[a + "q_b_proj.weight"].T
    else:
        q = h @ w[a + "q_proj.weight"].T
    q = q.view(1, T, nh, dn + dr).transpose(1, 2)
    q_nope, q_pe = torch.split(q, [dn, dr], dim=-1)
    ckv, k_pe = torch.split(h @ w[a + "kv_a_proj_with_mqa.weight"].T, [kvr, dr], dim=-1)
    k_pe = k_pe.view(1, T, 1, dr).transpose(1, 2)
    kv = (rms(ckv, w[a + "kv_a_layernorm.weight"], 1e-6) @ w[a + "kv_b_proj.weight"].T).view(1, T, nh, dn + dv)
    k_nope, v = torch.split(kv.transpose(1, 2), [dn, dv], dim=-1)
    cos, sin = hf_rope(T, dr, c["rope_theta"], c.get("rope_scaling"))
    q_pe, k_pe = apply_rotary_pos_emb(q_pe, k_pe, cos, sin)
    q = torch.cat([q_nope, q_pe], dim=-1)
    k = torch.cat([k_nope, k_pe.expand(1, nh, T, dr)], dim=-1)
    att = (q @ k.transpose(-2, -1)) * (dn + dr) ** -0.5 * deepseek_softmax_multiplier(c.get("rope_scaling"))
    att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(T, nh * dv) @ w[a + "o_proj.weight"].T


def hf_mlp(w, p, h):
    return (torch.nn.functional.silu(h @ w[p + "gate_proj.weight"].T) * (h @ w[p + "up_proj.weight"].T)) @ \
        w[p + "down_proj.weight"].T


def hf_moe(w, c, p, h, bias, load):
    """DeepseekV3MoE: MoEGate's noaux_tc (sigmoid scores; groups ranked by the sum of their top 2
    scores + bias, the best topk_group kept; top-k of score + bias; weights from the scores,
    normalised with norm_topk_prob, x routed_scaling_factor), the experts, the shared experts.
    load: the layer's tokens per expert, added to (the trainer's expert-bias update reads it)."""
    N, E, k = h.shape[0], c["n_routed_experts"], c["num_experts_per_tok"]
    G, M = c.get("n_group") or 1, c.get("topk_group") or 1
    scores = (h @ w[p + "mlp.gate.weight"].T).sigmoid()
    choice = scores.detach() + bias if c.get("topk_method") == "noaux_tc" else scores.detach()
    if G > 1:
        group_scores = choice.view(N, G, -1).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=M, dim=-1, sorted=False)[1]
        mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1).unsqueeze(-1).expand(N, G, E // G)
        choice = choice.masked_fill(~mask.reshape(N, E).bool(), float("-inf"))
    idx = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
    top = scores.gather(1, idx)
    if k > 1 and c.get("norm_topk_prob"):
        top = top / (top.sum(dim=-1, keepdim=True) + 1e-20)
    top = top * c.get("routed_scaling_factor", 1.0)
    load += torch.bincount(idx.reshape(-1), minlength=E)
    y = torch.zeros_like(h)
    for e in range(E):
        t, j = torch.where(idx == e)
        if len(t):
            y = y.index_add(0, t, hf_mlp(w, f"{p}mlp.experts.{e}.", h[t]) * top[t, j, None])
    if c.get("n_shared_experts"):
        y = y + hf_mlp(w, p + "mlp.shared_experts.", h)
    return y


def hf_layer(w, c, i, x, bias, loads):
    p, eps = f"model.layers.{i}.", c["rms_norm_eps"]
    x = x + hf_mla(w, c, p, rms(x, w[p + "input_layernorm.weight"], eps))
    h = rms(x, w[p + "post_attention_layernorm.weight"], eps)
    L = c["num_hidden_layers"]
    if min(i, L - 1) < c["first_k_dense_replace"]:  # an MTP layer is of the last layer's kind
        return x + hf_mlp(w, p + "mlp.", h)
    if i not in loads:
        loads[i] = torch.zeros(c["n_routed_experts"], dtype=torch.int64)
    return x + hf_moe(w, c, p, h, bias.get(i), loads[i])


def hf_deepseek_v3(w, c, ids, bias=None, loads=None):
    """(logits [T, V], [depth k's logits [T, V]]) of one sequence ids [T]. bias {layer: [E]}: the
    expert bias (default the file's e_score_correction_bias); loads {layer: [E]} gathers the routing."""
    L, eps, T = c["num_hidden_layers"], c["rms_norm_eps"], len(ids)
    if bias is None:
        bias = {i: w[f"model.layers.{i}.mlp.gate.e_score_correction_bias"] for i in range(L + c.get("num_nextn_predict_layers", 0))
                if f"model.layers.{i}.mlp.gate.e_score_correction_bias" in w}
    loads = {} if loads is None else loads
    x = w["model.embed_tokens.weight"][ids]
    for i in range(L):
        x = hf_layer(w, c, i, x, bias, loads)
    logits = rms(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T
    h, mtp = x, []
    for k in range(1, c.get("num_nextn_predict_layers", 0) + 1):
        p = f"model.layers.{L + k - 1}."
        rolled = torch.cat([ids[k:], torch.zeros(k, dtype=ids.dtype)])
        e = rms(w[p + "embed_tokens.weight"][rolled], w[p + "enorm.weight"], eps)
        h = torch.cat([e, rms(h, w[p + "hnorm.weight"], eps)], dim=-1) @ w[p + "eh_proj.weight"].T
        h = hf_layer(w, c, L + k - 1, h, bias, loads)
        mtp.append(rms(h, w[p + "shared_head.norm.weight"], eps) @ w[p + "shared_head.head.weight"].T)
    return logits, mtp
