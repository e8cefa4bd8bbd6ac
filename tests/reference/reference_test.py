"""Trident's GPT and Llama against independent PyTorch models (Debian's python3-torch).

Runs reference_dump (Trident), loads its weights and batch into a PyTorch model written here
from the GPT-2 definition (or the Llama one: RMSNorm, rotary embeddings, grouped-query
attention, SwiGLU, untied head; reference_dump --family llama), and checks: logits, loss, every parameter's gradient, then the
losses of 10 AdamW steps (warm-up + cosine, global-norm clipping, no decay on biases/norms).
Exit 0 when everything is within tolerance; otherwise prints each mismatch and exits 1.

Usage: reference_test.py REFERENCE_DUMP OUT_PREFIX [TOKEN_FILE] [--device cuda] [--precision bf16]
(the extra arguments go to reference_dump). fp32 runs are held to fp32 rounding elementwise; a
bf16 run (bf16 weights and activations, fp32 master weights and AdamW) is held, llm.c style, to
per-tensor tolerances: each tensor's max error relative to its max magnitude.
"""
import json
import math
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from deepseek_reference import MLA
from yarn_reference import hf_yarn_parameters, is_yarn, llama3_inv_freq

torch.set_num_threads(1)
torch.manual_seed(0)


def gated(cfg, g, u):
    """The gated unit: SwiGLU, or GPT-OSS's (modeling_gpt_oss.py, GptOssExperts.forward) with swiglu_limit."""
    limit = cfg.get("swiglu_limit", 0)
    if not limit:
        return F.silu(g) * u
    g = g.clamp(min=None, max=limit)
    u = u.clamp(min=-limit, max=limit)
    glu = g * torch.sigmoid(g * 1.702)
    return (u + 1) * glu


class MoE(nn.Module):
    """Mixture of experts written from its definition: softmax router, top-k, combine weights
    (raw scores or normalised over the k), capacity ceil(cf N k / E) per expert keeping the
    first assignments in token order, experts as the family's MLP; the load-balancing loss
    coeff E/k sum_e P_e f_e (f_e before dropping, no gradient) and the z-loss."""

    def __init__(self, C, cfg, llama):
        super().__init__()
        E, Fe = cfg["experts"], cfg["expert_ffn_hidden"]
        self.E, self.k, self.Fe, self.llama, self.cfg = E, cfg["experts_per_token"], Fe, llama, cfg
        self.router = nn.Linear(C, E, bias=cfg.get("router_bias", False))  # GPT-OSS's router has a bias
        self.bias = None  # DeepSeek-V3's e_score_correction_bias: no parameter (set by the test)
        fin = 2 * Fe if llama else Fe
        self.fc = nn.Parameter(torch.zeros(E * fin, C))
        self.fc_proj = nn.Parameter(torch.zeros(E * C, Fe))
        self.biased = not llama or cfg.get("mlp_bias", False)  # GPT-OSS: gate_up_proj_bias, down_proj_bias
        if self.biased:
            self.fc_b = nn.Parameter(torch.zeros(E * fin))
            self.fc_proj_b = nn.Parameter(torch.zeros(E * C))
        # Shared experts (DeepSeek style): one MLP of shared x Fe columns every token passes,
        # its output added to the routed experts' (no gate).
        self.Fs = cfg.get("shared_experts", 0) * Fe
        if self.Fs:
            self.sfc = nn.Parameter(torch.zeros((2 if llama else 1) * self.Fs, C))
            self.sfc_proj = nn.Parameter(torch.zeros(C, self.Fs))
            if not llama:
                self.sfc_b = nn.Parameter(torch.zeros(self.Fs))
                self.sfc_proj_b = nn.Parameter(torch.zeros(C))

    def shared(self, x):
        if self.llama:
            gu = x @ self.sfc.T
            return (F.silu(gu[:, :self.Fs]) * gu[:, self.Fs:]) @ self.sfc_proj.T
        return F.gelu(x @ self.sfc.T + self.sfc_b, approximate="tanh") @ self.sfc_proj.T + self.sfc_proj_b

    def expert(self, e, x):
        C, Fe = x.shape[1], self.Fe
        if self.llama:
            gu = x @ self.fc[e * 2 * Fe:(e + 1) * 2 * Fe].T
            if self.biased:
                gu = gu + self.fc_b[e * 2 * Fe:(e + 1) * 2 * Fe]
            h = gated(self.cfg, gu[:, :Fe], gu[:, Fe:])
            y = h @ self.fc_proj[e * C:(e + 1) * C].T
            return y + self.fc_proj_b[e * C:(e + 1) * C] if self.biased else y
        h = F.gelu(x @ self.fc[e * Fe:(e + 1) * Fe].T + self.fc_b[e * Fe:(e + 1) * Fe], approximate="tanh")
        return h @ self.fc_proj[e * C:(e + 1) * C].T + self.fc_proj_b[e * C:(e + 1) * C]

    def forward(self, x):
        shape, C = x.shape, x.shape[-1]
        x = x.reshape(-1, C)
        N, E, k, c = x.shape[0], self.E, self.k, self.cfg
        logits = self.router(x)
        if c.get("router_score", "softmax") == "sigmoid":
            # DeepSeek-V3's MoEGate (noaux_tc): sigmoid scores, the top-k of score +
            # e_score_correction_bias, the weights gathered from the scores, normalised
            # (norm_topk_prob) and scaled by routed_scaling_factor.
            probs = logits.sigmoid()
            choice = probs.detach() + self.bias if self.bias is not None else probs.detach()
            G, M = c.get("router_groups", 0), c.get("router_group_topk", 0)
            if G > 1:
                # Group-limited (Megatron-Core's group_limited_topk, HF DeepSeek-V3's noaux_tc at
                # k / M = 2): groups scored by the sum of their top k / M choice scores, the best M
                # kept, the other experts' scores -inf.
                group_scores = choice.view(N, G, -1).topk(k // M, dim=-1)[0].sum(dim=-1)
                group_idx = group_scores.topk(M, dim=-1, sorted=False)[1]
                group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
                score_mask = group_mask.unsqueeze(-1).expand(N, G, E // G).reshape(N, E)
                choice = choice.masked_fill(~score_mask.bool(), float("-inf"))
            idx = choice.topk(k, dim=-1)[1]
            top = probs.gather(1, idx)
            w = top / (top.sum(-1, keepdim=True) + 1e-20) if c["moe_normalise"] and k > 1 else top
            # Megatron-Core's load-balancing loss over sigmoid scores: each token's over their sum.
            aux_probs = probs / (probs.sum(-1, keepdim=True) + 1e-20)
        elif c.get("router_bias", False):
            # GPT-OSS's GptOssTopKRouter: the top-k of the (biased) logits, softmax over those k.
            probs = logits.softmax(-1)
            top, idx = logits.topk(k, dim=-1)
            w = top.softmax(dim=1)
            aux_probs = probs
        else:
            probs = logits.softmax(-1)
            top, idx = probs.topk(k, dim=-1)
            w = top / top.sum(-1, keepdim=True) if c["moe_normalise"] else top
            aux_probs = probs
        w = w * c.get("router_topk_scaling", 1.0)
        self.load = torch.bincount(idx.reshape(-1), minlength=E)  # this micro-batch's assignments per expert
        cap = math.ceil(c["capacity_factor"] * N * k / E) if c["moe_drop"] else N
        onehot = F.one_hot(idx.reshape(-1), E)  # assignments in token order
        position = (onehot.cumsum(0) - 1)[torch.arange(N * k), idx.reshape(-1)].view(N, k)
        keep = position < cap
        out = self.shared(x) if self.Fs else torch.zeros_like(x)
        for e in range(E):
            t, j = torch.nonzero((idx == e) & keep, as_tuple=True)
            if len(t):
                out = out.index_add(0, t, w[t, j].unsqueeze(1) * self.expert(e, x[t]))
        f = onehot.sum(0).to(x.dtype) / N
        aux = c["moe_aux_coeff"] * E / k * (aux_probs.mean(0) * f).sum()
        z = c["moe_z_coeff"] * (torch.logsumexp(logits, -1) ** 2).mean()
        self.dropped = int((~keep).sum())
        return out.view(shape), aux + z

    def names(self, p):
        shared = {}
        if self.Fs and self.llama:
            shared = {p + "shared.gate_up_w": self.sfc, p + "shared.fc_proj_w": self.sfc_proj}
        elif self.Fs:
            shared = {p + "shared.fc_w": self.sfc, p + "shared.fc_b": self.sfc_b, p + "shared.fc_proj_w": self.sfc_proj,
                      p + "shared.fc_proj_b": self.sfc_proj_b}
        if self.llama:
            out = {p + "router_w": self.router.weight, p + "experts.gate_up_w": self.fc,
                   p + "experts.fc_proj_w": self.fc_proj, **shared}
            if self.router.bias is not None:
                out[p + "router_b"] = self.router.bias
            if self.biased:
                out.update({p + "experts.gate_up_b": self.fc_b, p + "experts.fc_proj_b": self.fc_proj_b})
            return out
        return {p + "router_w": self.router.weight, p + "experts.fc_w": self.fc, p + "experts.fc_b": self.fc_b,
                p + "experts.fc_proj_w": self.fc_proj, p + "experts.fc_proj_b": self.fc_proj_b, **shared}


def is_moe_layer(cfg, i):
    dense, freq = cfg.get("moe_dense_layers", 0), cfg.get("moe_layer_freq", 1)
    return cfg.get("experts", 0) > 0 and i >= dense and (i - dense) % freq == 0


class Block(nn.Module):
    def __init__(self, C, nh, Fh, moe=None):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.moe = moe
        if moe is None:
            self.fc = nn.Linear(C, Fh)
            self.fc_proj = nn.Linear(Fh, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        k = k.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        v = v.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        if self.moe is not None:
            out, aux = self.moe(self.ln2(x))
            return x + out, aux
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), 0.0


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, V, T = cfg["hidden"], cfg["vocab"], cfg["seq_len"]
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, cfg["heads"], cfg["ffn_hidden"], MoE(C, cfg, False) if is_moe_layer(cfg, i)
                                          else None) for i in range(cfg["layers"]))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        self.aux = 0.0
        for b in self.blocks:
            x, aux = b(x)
            self.aux = self.aux + aux
        logits = self.lnf(x) @ self.wte.weight.T  # tied head
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def trident_names(self):
        """Trident tensor name -> PyTorch parameter."""
        out = {"wte": self.wte.weight, "wpe": self.wpe.weight, "lnf_w": self.lnf.weight, "lnf_b": self.lnf.bias}
        for i, b in enumerate(self.blocks):
            p = f"layers.{i}."
            out.update({p + "ln1_w": b.ln1.weight, p + "ln1_b": b.ln1.bias, p + "qkv_w": b.qkv.weight,
                        p + "qkv_b": b.qkv.bias, p + "attn_proj_w": b.proj.weight, p + "attn_proj_b": b.proj.bias,
                        p + "ln2_w": b.ln2.weight, p + "ln2_b": b.ln2.bias})
            if b.moe is not None:
                out.update(b.moe.names(p))
            else:
                out.update({p + "fc_w": b.fc.weight, p + "fc_b": b.fc.bias, p + "fc_proj_w": b.fc_proj.weight,
                            p + "fc_proj_b": b.fc_proj.bias})
        return out


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    """Rotary embedding, Meta's convention: pairs (2i, 2i+1) of x [B, heads, T, hd]; cos/sin [T, hd/2]."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    """Llama's layer; with cfg's head_dim and qk_norm Qwen3's attention (modeling_qwen3.py,
    Qwen3Attention): q/k/v projected to heads x head_dim (not C), an RMSNorm of head_dim weights
    over each head's queries and keys (q_norm, k_norm) before the rotary embedding, the output
    projection from heads x head_dim; RMSNorm epsilon rms_norm_eps."""

    def __init__(self, C, nh, nkv, Fh, moe=None, hd=None, qk_norm=False, eps=1e-5, window=0, sinks=False, mla=None,
                 cfg=None):
        super().__init__()
        cfg = cfg or {}
        self.cfg = cfg  # GPT-OSS: biases (attention_bias, mlp_bias) and the clamped unit (swiglu_limit)
        # DeepSeek-V3's multi-head latent attention (deepseek_reference.py) instead of q/kv/proj
        self.mla = MLA(C, mla) if mla else None
        self.window = window  # GPT-OSS: a sliding window of `window` keys on this layer (0: none)
        self.sinks = nn.Parameter(torch.zeros(nh)) if sinks else None
        self.nh, self.nkv, self.hd, self.Fh, self.moe = nh, nkv, hd or C // nh, Fh, moe
        self.ln1 = RMSNorm(C, eps)
        if self.mla is None:
            qkv_bias = cfg.get("qkv_bias", False)
            self.q = nn.Linear(C, nh * self.hd, bias=qkv_bias)
            self.kv = nn.Linear(C, 2 * nkv * self.hd, bias=qkv_bias)  # keys of all kv heads, then values
            self.proj = nn.Linear(nh * self.hd, C, bias=cfg.get("proj_bias", False))
        self.q_norm = RMSNorm(self.hd, eps) if qk_norm else None
        self.k_norm = RMSNorm(self.hd, eps) if qk_norm else None
        self.ln2 = RMSNorm(C, eps)
        if moe is None:
            self.gate_up = nn.Linear(C, 2 * Fh, bias=cfg.get("mlp_bias", False))  # gate rows, then up rows
            self.down = nn.Linear(Fh, C, bias=cfg.get("mlp_bias", False))

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.ln1(x)
        if self.mla is not None:
            x = x + self.mla(h)
            return self.mlp(x)
        q = self.q(h).view(B, T, self.nh, self.hd)
        k, v = self.kv(h).split(self.nkv * self.hd, dim=2)
        k = k.reshape(B, T, self.nkv, self.hd)
        if self.q_norm is not None:  # Qwen3: per head, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.reshape(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = self.nh // self.nkv  # each kv head serves `rep` consecutive query heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        if self.window:  # modeling_gpt_oss's sliding mask: key j seen by query i when j > i - window
            pos = torch.arange(T)
            mask = mask & (pos[None, :] > pos[:, None] - self.window)
        att = att.masked_fill(~mask, float("-inf"))
        if self.sinks is not None:  # eager_attention_forward: the sink concatenated, dropped after the softmax
            sink = self.sinks.reshape(1, -1, 1, 1).expand(B, -1, T, -1)
            combined = torch.cat([att, sink], dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            att = F.softmax(combined, dim=-1)[..., :-1]
        else:
            att = att.softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, self.nh * self.hd))
        return self.mlp(x)

    def mlp(self, x):
        if self.moe is not None:
            out, aux = self.moe(self.ln2(x))
            return x + out, aux
        g, u = self.gate_up(self.ln2(x)).split(self.Fh, dim=2)
        return x + self.down(gated(self.cfg, g, u)), 0.0


class MtpLayer(nn.Module):
    """DeepSeek-V3's multi-token prediction module (section 2.2; Megatron-Core's
    MultiTokenPredictionLayer): RMSNorms of the embedding and of the previous depth's hidden
    state, concatenated embedding first, projected by eh_proj (2C -> C, no bias), one layer of the
    model's last layer's kind, its own final norm before the shared head."""

    def __init__(self, C, block, eps):
        super().__init__()
        self.enorm, self.hnorm, self.norm = RMSNorm(C, eps), RMSNorm(C, eps), RMSNorm(C, eps)
        self.eh_proj = nn.Linear(2 * C, C, bias=False)
        self.block = block


def llama_block_names(b, p):
    out = {p + "ln1_w": b.ln1.weight, p + "ln2_w": b.ln2.weight}
    if b.mla is not None:
        out.update(b.mla.trident_names(p))
    else:
        out.update({p + "q_w": b.q.weight, p + "kv_w": b.kv.weight, p + "attn_proj_w": b.proj.weight})
        if b.q.bias is not None:
            out.update({p + "q_b": b.q.bias, p + "kv_b": b.kv.bias})
        if b.proj.bias is not None:
            out[p + "attn_proj_b"] = b.proj.bias
    if b.q_norm is not None:
        out.update({p + "q_norm_w": b.q_norm.weight, p + "k_norm_w": b.k_norm.weight})
    if b.sinks is not None:
        out[p + "sinks"] = b.sinks
    if b.moe is not None:
        out.update(b.moe.names(p))
    else:
        out.update({p + "gate_up_w": b.gate_up.weight, p + "fc_proj_w": b.down.weight})
        if b.gate_up.bias is not None:
            out.update({p + "gate_up_b": b.gate_up.bias, p + "fc_proj_b": b.down.bias})
    return out


def mtp_term(model, cfg):
    """The objective's multi-token-prediction part: mtp_loss_scaling / D x the depths' losses."""
    losses = getattr(model, "mtp_losses", [])
    return cfg.get("mtp_loss_scaling", 0.1) / len(losses) * sum(losses) if losses else 0.0


def window_of(cfg, i):
    """GPT-OSS's layer_types: sliding_attention except every window_attn_skip_freq-th layer."""
    w, every = cfg.get("window_size", 0), cfg.get("window_attn_skip_freq", 0)
    return w if w > 0 and (every <= 0 or (i + 1) % every != 0) else 0


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, V = cfg["hidden"], cfg["vocab"]
        self.hd, self.theta = cfg.get("head_dim", C // cfg["heads"]), cfg["rope_theta"]
        self.rope_scaling = cfg.get("rope_scaling")
        eps = cfg.get("norm_eps", 1e-5)
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, cfg["heads"], cfg["kv_heads"], cfg["ffn_hidden"],
                                               MoE(C, cfg, True) if is_moe_layer(cfg, i) else None, self.hd,
                                               cfg.get("qk_norm", False), eps, window_of(cfg, i),
                                               cfg.get("attention_sinks", False),
                                               cfg if cfg.get("kv_lora_rank", 0) > 0 else None, cfg)
                                    for i in range(cfg["layers"]))
        self.lnf = RMSNorm(C, eps)
        self.head = nn.Linear(C, V, bias=False)  # untied
        L = cfg["layers"]  # MTP layers: of the last layer's kind, after the model's (indices L onward)
        self.mtp = nn.ModuleList(
            MtpLayer(C, LlamaBlock(C, cfg["heads"], cfg["kv_heads"], cfg["ffn_hidden"],
                                   MoE(C, cfg, True) if is_moe_layer(cfg, L - 1) else None, self.hd,
                                   cfg.get("qk_norm", False), eps, window_of(cfg, L + j),
                                   cfg.get("attention_sinks", False),
                                   cfg if cfg.get("kv_lora_rank", 0) > 0 else None, cfg), eps)
            for j in range(cfg.get("mtp_layers", 0)))

    def forward(self, idx, targets):
        B, T = idx.shape
        inv = (self.theta ** (-torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)).float()
        attn = 1.0  # YaRN's attention factor on cos and sin (GPT-OSS's: reference_dump --yarn)
        if is_yarn(self.rope_scaling):
            inv, attn = hf_yarn_parameters(self.rope_scaling, self.theta, self.hd)
        elif self.rope_scaling:  # Llama 3.1 (reference_dump --llama3-rope)
            inv = llama3_inv_freq(inv, self.rope_scaling)
        inv = inv.double()
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        cos, sin = (ang.cos() * attn).float(), (ang.sin() * attn).float()
        x = self.wte(idx)
        self.aux = 0.0
        for b in self.blocks:
            x, aux = b(x, cos, sin)
            self.aux = self.aux + aux
        logits = self.head(self.lnf(x))
        # Multi-token prediction, Megatron-Core's: depth k rolls the input ids and the labels by k
        # (rolled-in ids 0, their labels masked out of the mean), the rotary positions unrolled.
        h, V = x, logits.size(-1)
        self.mtp_logits, self.mtp_losses = [], []
        for k, m in enumerate(self.mtp, start=1):
            ids = torch.cat([idx[:, k:], torch.zeros(B, k, dtype=idx.dtype)], dim=1)
            h = m.eh_proj(torch.cat([m.enorm(self.wte(ids)), m.hnorm(h)], dim=-1))
            h, aux = m.block(h, cos, sin)
            self.aux = self.aux + aux
            lk = self.head(m.norm(h))
            self.mtp_logits.append(lk)
            self.mtp_losses.append(F.cross_entropy(lk[:, :T - k].reshape(-1, V), targets[:, k:].reshape(-1)))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def trident_names(self):
        out = {"wte": self.wte.weight, "lnf_w": self.lnf.weight, "head_w": self.head.weight}
        for i, b in enumerate(self.blocks):
            out.update(llama_block_names(b, f"layers.{i}."))
        for j, m in enumerate(self.mtp):
            p = f"layers.{len(self.blocks) + j}."
            out.update({p + "enorm_w": m.enorm.weight, p + "hnorm_w": m.hnorm.weight, p + "eh_proj_w": m.eh_proj.weight,
                        p + "mtp_norm_w": m.norm.weight, **llama_block_names(m.block, p)})
        return out

    def all_blocks(self):
        return list(self.blocks) + [m.block for m in self.mtp]


def lr_at(c, step):
    if c["warmup_steps"] > 0 and step < c["warmup_steps"]:
        return c["lr"] * (step + 1) / c["warmup_steps"]
    if step >= c["decay_steps"]:
        return c["min_lr"]
    progress = (step - c["warmup_steps"]) / (c["decay_steps"] - c["warmup_steps"])
    return c["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (c["lr"] - c["min_lr"])


def main():
    exe, prefix = sys.argv[1], sys.argv[2]
    subprocess.run([exe, prefix] + sys.argv[3:], check=True)
    meta = json.load(open(prefix + ".json"))
    raw = open(prefix + ".bin", "rb").read()

    def arr(name):
        a = meta["arrays"][name]
        dt = np.float32 if a["dtype"] == "f32" else np.int32
        return np.frombuffer(raw, dtype=dt, count=a["count"], offset=a["offset"])

    cfg = meta["config"]
    bf16 = meta.get("precision", "fp32") == "bf16"
    print(f"Trident {cfg.get('family', 'gpt')} on {meta.get('device', 'cpu')} in {meta.get('precision', 'fp32')} vs PyTorch fp32 on the CPU")
    B, T, V = cfg["micro_batch"], cfg["seq_len"], cfg["vocab"]
    Model = Llama if cfg.get("family", "gpt") == "llama" else GPT
    def set_bias(model):  # the dump's initial expert bias, MoE layer by MoE layer
        blocks = model.all_blocks() if hasattr(model, "all_blocks") else model.blocks
        moes = [b.moe for b in blocks if b.moe is not None]
        for i, m in enumerate(moes):
            if "expert_bias" in cfg:
                m.bias = torch.tensor(cfg["expert_bias"][i], dtype=torch.float32)
        return moes

    model = Model(cfg)
    set_bias(model)
    named = model.trident_names()
    params, grads = arr("params"), arr("grads")
    with torch.no_grad():
        for t in meta["tensors"]:
            n = t["rows"] * t["cols"]
            named[t["name"]].copy_(torch.from_numpy(params[t["offset"]:t["offset"] + n].copy()).view_as(named[t["name"]]))
    assert len(meta["tensors"]) == len(list(model.parameters())), "every PyTorch parameter must have a Trident tensor"

    failures = []

    # bf16 per-tensor tolerances (max |error| / max |reference|; absolute for losses).
    BF16 = {"logits": 3e-2, "loss": 2e-2, "grad": 1e-1, "losses": 5e-2}

    def check(what, got, want, rtol, atol, kind):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        err = np.abs(got - want)
        if bf16:
            scale = 1.0 if kind in ("loss", "losses") else max(np.abs(want).max(), 1e-30)
            value, tol = err.max() / scale, BF16[kind]
            ok = np.isfinite(got).all() and value <= tol
            detail = f"(tol {tol:.0e}, {'abs' if scale == 1.0 else 'rel to max'})"
        else:
            ok = np.isfinite(got).all() and not (err > atol + rtol * np.abs(want)).any()
            detail = ""
        status = "ok" if ok else "FAIL"
        print(f"{status:4} {what:28} max abs err {err.max():.3e}  max |ref| {np.abs(want).max():.3e} {detail}")
        if not ok:
            failures.append(what)

    idx = torch.from_numpy(arr("tokens").astype(np.int64)).view(B, T)
    tgt = torch.from_numpy(arr("targets").astype(np.int64)).view(B, T)
    logits, loss = model(idx, tgt)
    (loss + model.aux + mtp_term(model, cfg)).backward()
    check("logits", arr("logits"), logits.detach().numpy().reshape(-1), 1e-4, 1e-4, "logits")
    if (cfg.get("qk_norm", False) or cfg.get("attention_sinks", False) or cfg.get("rope_scaling")
            or cfg.get("kv_lora_rank", 0) > 0) and not bf16:
        # Qwen3, GPT-OSS, Llama 3.1's rope scaling: held to 1e-5 of the logits' largest magnitude
        want = logits.detach().numpy().reshape(-1).astype(np.float64)
        rel = np.abs(arr("logits") - want).max() / np.abs(want).max()
        print(f"{'ok' if rel <= 1e-5 else 'FAIL':4} logits relative to max |ref|: {rel:.3e} (tol 1e-05)")
        if not rel <= 1e-5:
            failures.append("logits (1e-5 relative)")
    check("loss", arr("loss"), [loss.item()], 1e-5, 1e-5, "loss")
    for k in range(1, cfg.get("mtp_layers", 0) + 1):  # multi-token prediction: logits and loss, 1e-5 relative
        want = model.mtp_logits[k - 1].detach().numpy().reshape(-1)
        check(f"mtp_{k} logits", arr(f"mtp_logits_{k}"), want, 1e-4, 1e-4, "logits")
        rel = np.abs(arr(f"mtp_logits_{k}") - want).max() / np.abs(want).max()
        print(f"{'ok' if rel <= 1e-5 else 'FAIL':4} mtp_{k} logits relative to max |ref|: {rel:.3e} (tol 1e-05)")
        if not rel <= 1e-5:
            failures.append(f"mtp_{k} logits (1e-5 relative)")
        check(f"mtp_{k} loss", arr(f"mtp_loss_{k}"), [model.mtp_losses[k - 1].item()], 1e-5, 0.0, "loss")
    if cfg.get("experts", 0) > 0:
        check("moe auxiliary losses", arr("moe_aux_loss"), [float(model.aux)], 1e-5, 1e-6, "loss")
        blocks = model.all_blocks() if hasattr(model, "all_blocks") else model.blocks
        dropped = sum(b.moe.dropped for b in blocks if b.moe is not None)
        print(f"{'ok' if dropped == arr('moe_dropped')[0] else 'FAIL':4} dropped assignments: trident "
              f"{arr('moe_dropped')[0]}, pytorch {dropped}")
        if dropped != arr("moe_dropped")[0]:
            failures.append("dropped assignments")
    for t in meta["tensors"]:
        n = t["rows"] * t["cols"]
        g = named[t["name"]].grad.numpy().reshape(-1)
        check("grad " + t["name"], grads[t["offset"]:t["offset"] + n], g, 1e-3, 2e-5 * max(1.0, np.abs(g).max()), "grad")

    # Ten AdamW steps from the same initial weights.
    model = Model(cfg)
    moes = set_bias(model)
    named = model.trident_names()
    with torch.no_grad():
        for t in meta["tensors"]:
            n = t["rows"] * t["cols"]
            named[t["name"]].copy_(torch.from_numpy(params[t["offset"]:t["offset"] + n].copy()).view_as(named[t["name"]]))
    decay = [named[t["name"]] for t in meta["tensors"] if t["decay"]]
    no_decay = [named[t["name"]] for t in meta["tensors"] if not t["decay"]]
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    tt, tg = arr("train_tokens").astype(np.int64), arr("train_targets").astype(np.int64)
    accum, per = cfg["grad_accum"], B * T
    losses, mtp_losses = [], []
    for step in range(cfg["steps"]):
        optim.zero_grad()
        total = 0.0
        loads = [torch.zeros(m.E, dtype=torch.int64) for m in moes]
        for micro in range(accum):
            s = (step * accum + micro) * per
            i = torch.from_numpy(tt[s:s + per]).view(B, T)
            g = torch.from_numpy(tg[s:s + per]).view(B, T)
            _, l = model(i, g)
            ((l + model.aux + mtp_term(model, cfg)) / accum).backward()
            total += l.item() / accum
            if micro == 0:
                mtp_step = [0.0] * len(getattr(model, "mtp_losses", []))
            for d, x in enumerate(getattr(model, "mtp_losses", [])):  # equal micro-batches: the mean of means
                mtp_step[d] += x.item() / accum
            for load, m in zip(loads, moes):
                load += m.load
        if "expert_bias" in cfg:
            # Megatron-Core's get_updated_expert_bias on the step's load: bias += rate * sign(mean - load).
            for load, m in zip(loads, moes):
                offset = load.sum().double() / m.E - load.double()
                m.bias = m.bias + torch.sign(offset).float() * cfg["bias_update_rate"]
        losses.append(total)
        mtp_losses.extend(mtp_step)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        for group in optim.param_groups:
            group["lr"] = lr_at(cfg, step)
        optim.step()
    print("trident losses:", " ".join(f"{x:.5f}" for x in arr("losses")))
    print("pytorch losses:", " ".join(f"{x:.5f}" for x in losses))
    check("10 AdamW losses", arr("losses"), losses, 1e-4, 1e-4, "losses")
    if cfg.get("mtp_layers", 0):
        print("trident mtp losses:", " ".join(f"{x:.5f}" for x in arr("mtp_losses")))
        print("pytorch mtp losses:", " ".join(f"{x:.5f}" for x in mtp_losses))
        check("10 AdamW steps' MTP losses", arr("mtp_losses"), mtp_losses, 1e-5, 0.0, "losses")
    if "expert_bias" in cfg:
        want = torch.cat([m.bias for m in moes]).numpy()
        moved = int((want != np.asarray(cfg["expert_bias"], dtype=np.float32).reshape(-1)).sum())
        print(f"expert bias after {cfg['steps']} steps: {moved} of {want.size} values moved")
        check("expert bias after the steps", arr("expert_bias_final"), want, 0.0, 1e-7, "losses")
    if failures:
        print("MISMATCH:", ", ".join(failures))
        return 1
    print(f"Trident's {cfg.get('family', 'gpt')} matches PyTorch: logits, loss, all gradients, 10 AdamW losses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
