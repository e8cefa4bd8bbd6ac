#!/usr/bin/env python3
"""GPU check (run by scripts/gpu-check.sh): holds GptCuda's outputs (written by gpu_gpt_check)
against the same GPT-2 in PyTorch, computed in float64 from the same initial weights and tokens:
logits, loss, every parameter gradient, and the losses of 10 AdamW steps (torch.optim.AdamW with
clip_grad_norm_). Tolerances: fp32 run -> fp32 rounding; bf16 run -> bf16 rounding of
activations and weights (8-bit mantissa), fp32 master weights.

Usage: gpu_torch_check.py DIR [DIR ...]   (each DIR written by gpu_gpt_check). Exit 1 on failure."""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOLERANCES = {  # (logits rel, loss abs, grad rel per tensor, 10-step losses abs)
    "fp32": (1e-4, 1e-4, 2e-3, 2e-3),
    "bf16": (3e-2, 2e-2, 1e-1, 5e-2),
}


def rel_err(ref, got):
    return float((ref - got).abs().max() / ref.abs().max().clamp_min(1e-30))


def forward(p, meta, idx):
    """p: dict of parameter tensors (unpadded wte). idx: (B, T) long. Returns logits (B, T, V)."""
    L, C, H = meta["layers"], meta["hidden"], meta["heads"]
    B, T = idx.shape
    x = p["wte"][idx] + p["wpe"][:T][None]
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = h @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    return x @ p["wte"].T


def views(flat, meta):
    """Named views into the flat buffer, shaped; wte keeps only the real vocabulary rows."""
    L, C, V, S = meta["layers"], meta["hidden"], meta["vocab"], meta["max_seq"]
    shapes = {"wte": (meta["padded_vocab"], C), "wpe": (S, C), "ln1w": (L, C), "ln1b": (L, C),
              "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C),
              "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
              "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,)}
    out = {}
    for t in meta["tensors"]:
        v = flat[t["offset"]:t["offset"] + t["count"]].view(shapes[t["name"]])
        out[t["name"]] = v[:V] if t["name"] == "wte" else v
    return out


def check_dir(d, device):
    meta = json.load(open(f"{d}/meta.json"))
    prec = meta["precision"]
    label = f'{prec}/{meta.get("attention", "flash")}' 
    tol_logits, tol_loss, tol_grad, tol_steps = TOLERANCES[prec]
    B, T, V = meta["batch"], meta["seq"], meta["vocab"]
    dt = torch.float64
    flat0 = torch.from_numpy(np.fromfile(f"{d}/params.bin", dtype=np.float32)).to(device, dt)
    ids = torch.from_numpy(np.fromfile(f"{d}/tokens.bin", dtype=np.int32)).to(device).long().view(B, T + 1)
    idx, tgt = ids[:, :-1], ids[:, 1:]
    got_logits = torch.from_numpy(np.fromfile(f"{d}/logits.bin", dtype=np.float32)).to(device, dt).view(B, T, V)
    got_grads = torch.from_numpy(np.fromfile(f"{d}/grads.bin", dtype=np.float32)).to(device, dt)
    got_losses = [float(x) for x in open(f"{d}/losses.txt").read().split()]

    failures = []

    def verdict(name, value, tol):
        ok = value <= tol and math.isfinite(value)
        if not ok:
            failures.append(f"{label} {name}" if label != f"{prec}/flash" else name)
        print(f"{'ok' if ok else 'FAIL':4s} {label:12s} {name:40s} {value:.3e} (tol {tol:.0e})")

    # Logits, loss and gradients at the initial weights.
    leaves = {k: v.clone().requires_grad_(True) for k, v in views(flat0, meta).items()}
    logits = forward(leaves, meta, idx)
    verdict("logits max rel error", rel_err(logits.detach(), got_logits), tol_logits)
    loss = F.cross_entropy(logits.view(-1, V), tgt.reshape(-1))
    print(f"     {label} loss: PyTorch {loss.item():.6f}  Trident {got_losses[0]:.6f}")
    verdict("loss abs error", abs(loss.item() - got_losses[0]), tol_loss)
    loss.backward()
    gv = views(got_grads, meta)
    worst = 0.0
    for name, leaf in leaves.items():
        e = rel_err(leaf.grad, gv[name])
        worst = max(worst, e)
        verdict(f"grad {name} max rel error", e, tol_grad)
    padded = got_grads[meta["tensors"][0]["offset"] + V * meta["hidden"]:meta["tensors"][0]["count"]]
    verdict("grad of padded wte rows (must be 0)", float(padded.abs().max()) if padded.numel() else 0.0, 0.0)

    # 10 AdamW steps on the same batch, as gpu_gpt_check does.
    # One flat parameter split into decayed / non-decayed groups exactly like Trident's slices.
    params = [torch.nn.Parameter(flat0[t["offset"]:t["offset"] + t["count"]].clone()) for t in meta["tensors"]]
    groups = [{"params": [p for p, t in zip(params, meta["tensors"]) if t["decay"]], "weight_decay": meta["weight_decay"]},
              {"params": [p for p, t in zip(params, meta["tensors"]) if not t["decay"]], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=meta["lr"], betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    ref_losses = []
    for _ in range(meta["steps"]):
        opt.zero_grad(set_to_none=True)
        flatp = torch.cat([p.view(-1) for p in params])
        l = F.cross_entropy(forward(views(flatp, meta), meta, idx).view(-1, V), tgt.reshape(-1))
        l.backward()
        torch.nn.utils.clip_grad_norm_(params, meta["grad_clip"])
        opt.step()
        ref_losses.append(l.item())
    print(f"     {label} 10-step losses PyTorch: " + " ".join(f"{x:.4f}" for x in ref_losses))
    print(f"     {label} 10-step losses Trident: " + " ".join(f"{x:.4f}" for x in got_losses[1:]))
    verdict("10-step losses max abs error", max(abs(a - b) for a, b in zip(ref_losses, got_losses[1:])), tol_steps)
    return failures


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"PyTorch {torch.__version__} reference in float64 on {device}")
    failures = []
    for d in sys.argv[1:]:
        failures += check_dir(d, device)
    print(("FAILED: " + ", ".join(failures)) if failures else "PASSED: model matches PyTorch")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
