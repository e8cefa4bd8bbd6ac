"""DeepSeek-V3's multi-head latent attention written from Hugging Face's modeling_deepseek.py
(DeepseekV3Attention, DeepseekV3RotaryEmbedding, apply_rotary_pos_emb), for the reference test
and the import test. The rope is HF's: q_pe and k_pe de-interleaved (view d/2, 2 -> transpose)
and rotated by rotate_half with cos/sin of cat(freqs, freqs), on the weights as HF stores them."""
import math

import torch
import torch.nn as nn


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
        self.softmax_scale = qd ** -0.5

    def rope(self, T):
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dr, 2, dtype=torch.float64) / self.dr))
        freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().float(), emb.sin().float()

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
