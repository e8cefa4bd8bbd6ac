#!/usr/bin/env python3
"""PyTorch peer for gpu_gpt_bench (run by scripts/gpu-check.sh): the same GPT-2 (tanh GELU, tied
output embedding, vocabulary padded to 50304 like Trident's) trained in bf16 autocast with fused
AdamW and gradient clipping, eager or torch.compile, on the same GPU, same batch and sequence.
Attention is F.scaled_dot_product_attention(is_causal=True) (PyTorch's flash kernel).
Reports tokens/s and MFU with the same FLOP formula (6*N + 12*L*C*T) against the bf16 matmul
rate it measures itself (torch.mm 8192^3) and, when given, the one Trident measured.

Usage: gpu_torch_bench.py PRESET BATCH SEQ STEPS eager|compile [TRIDENT_MATMUL_TFLOPS]"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"gpt2-small": (12, 768, 12), "gpt2-medium": (24, 1024, 16)}
VOCAB, PADDED, MAX_SEQ = 50257, 50304, 1024


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(PADDED, C), nn.Embedding(MAX_SEQ, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits[..., :VOCAB].float().reshape(-1, VOCAB), targets.reshape(-1))


def matmul_rate(n=8192):
    a = torch.zeros(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.zeros(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        best = max(best, 2 * n ** 3 * 20 / (time.perf_counter() - t0))
    return best


def main():
    preset, B, T, steps, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    trident_peak = float(sys.argv[6]) * 1e12 if len(sys.argv) > 6 else None
    L, C, H = PRESETS[preset]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(L, C, H).cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, VOCAB, (B, T), device="cuda")
    tgt = torch.randint(0, VOCAB, (B, T), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    t_warm = time.perf_counter()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t_warm
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0

    n_matmul = sum(p.numel() for p in model.parameters()) - (PADDED - VOCAB) * C - MAX_SEQ * C
    flops_per_token = 6 * n_matmul + 12 * L * C * T
    tps = B * T * steps / seconds
    achieved = tps * flops_per_token
    peak = matmul_rate()
    print(f"PyTorch {torch.__version__} {mode} {preset} B={B} T={T}: step {1e3 * seconds / steps:.1f} ms, "
          f"{tps:.0f} tokens/s, loss {loss.item():.4f} (warm-up incl. compile {warm_s:.1f} s)")
    print(f"achieved {achieved / 1e12:.1f} TFLOP/s; torch bf16 matmul rate {peak / 1e12:.1f} TFLOP/s; "
          f"MFU {100 * achieved / peak:.1f}%" + (f" ({100 * achieved / trident_peak:.1f}% of Trident's measured rate)"
                                               if trident_peak else ""))
    print(f"RESULT impl=torch-{mode} model={preset} B={B} T={T} tokens_per_s={tps:.0f} tflops={achieved / 1e12:.2f} "
          f"matmul_tflops={peak / 1e12:.2f} mfu={achieved / peak:.4f} flops_per_token={flops_per_token}")


if __name__ == "__main__":
    main()
