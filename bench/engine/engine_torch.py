"""PyTorch peer for the engine benchmark: the same GPT-2 model, batch, threads and optimizer
(AdamW, clipping) as `trident train`, timed the same way (mean step time after the first).
Prints one JSON line: {"tokens_per_s", "step_s", "peak_rss_mib", "loss", "blas_core"} (blas_core: the core
type of the OpenBLAS PyTorch runs, so the benchmark shows both sides on the same kernels).
usage: engine_torch.py LAYERS HIDDEN HEADS SEQ VOCAB BATCH STEPS THREADS
"""
import ctypes
import json
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh, T):
        super().__init__()
        self.nh = nh
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: its fused causal attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # Debian's 1.13: nanoGPT's explicit masked softmax
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
            y = att @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, nh, T, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, nh, T) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for mod in self.modules():  # GPT-2 initialisation, as Trident's
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
                if getattr(mod, "bias", None) is not None:
                    nn.init.zeros_(mod.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def blas_core():
    """The core type the OpenBLAS this process loaded runs (openblas_get_corename), or "none"."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libopenblas" in line and ".so" in line}
    for path in sorted(paths):
        name = ctypes.CDLL(path).openblas_get_corename
        name.restype = ctypes.c_char_p
        return name().decode()
    return "none"


def main():
    L, C, nh, T, V, B, steps, threads = map(int, sys.argv[1:9])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(L, C, nh, T, V)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    times = []
    for step in range(steps):
        idx = torch.randint(0, V, (B, T))
        tgt = torch.randint(0, V, (B, T))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    step_s = sum(times[1:]) / max(1, len(times) - 1) if len(times) > 1 else times[0]
    print(json.dumps({"tokens_per_s": B * T / step_s, "step_s": step_s,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "loss": loss.item(), "blas_core": blas_core()}))


if __name__ == "__main__":
    main()
