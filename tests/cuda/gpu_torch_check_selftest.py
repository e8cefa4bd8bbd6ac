#!/usr/bin/env python3
"""Proves the PyTorch checker of the GPU model can pass and can fail, without a GPU: writes a
small model's outputs in gpu_gpt_check's file format (computed in float32 by an independent
nn.Module-free loop over the same formulas), checks they pass, then perturbs one gradient, one
logit and one loss and checks each is caught. Usage: selftest.py PATH/gpu_torch_check.py"""
import importlib.util
import json
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

spec = importlib.util.spec_from_file_location("checker", sys.argv[1])
checker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checker)

L, C, H, S, V, VP, B, T, STEPS = 2, 64, 2, 16, 300, 384, 2, 16, 10
names = [("wte", VP * C, True), ("wpe", S * C, True), ("ln1w", L * C, False), ("ln1b", L * C, False),
         ("qkvw", L * 3 * C * C, True), ("qkvb", L * 3 * C, False), ("attprojw", L * C * C, True),
         ("attprojb", L * C, False), ("ln2w", L * C, False), ("ln2b", L * C, False), ("fcw", L * 4 * C * C, True),
         ("fcb", L * 4 * C, False), ("fcprojw", L * 4 * C * C, True), ("fcprojb", L * C, False),
         ("lnfw", C, False), ("lnfb", C, False)]
tensors, off = [], 0
for n, c, d in names:
    tensors.append({"name": n, "offset": off, "count": c, "decay": d})
    off += c
meta = {"layers": L, "hidden": C, "heads": H, "max_seq": S, "vocab": V, "padded_vocab": VP, "batch": B, "seq": T,
        "precision": "fp32", "steps": STEPS, "lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
        "weight_decay": 0.1, "grad_clip": 1.0, "tensors": tensors}

g = torch.Generator().manual_seed(0)
flat = torch.randn(off, generator=g) * 0.02
for t in tensors:
    if t["name"] in ("ln1w", "ln2w", "lnfw"):
        flat[t["offset"]:t["offset"] + t["count"]] = 1.0
    elif not t["decay"]:
        flat[t["offset"]:t["offset"] + t["count"]] = 0.0
flat[V * C:VP * C] = 0.0  # padded vocabulary rows
ids = torch.randint(0, V, (B, T + 1), generator=g, dtype=torch.int32)
idx, tgt = ids[:, :-1].long(), ids[:, 1:].long()

# float32 reference outputs, written like gpu_gpt_check does.
leaf = flat.clone().requires_grad_(True)
logits = checker.forward(checker.views(leaf, meta), meta, idx)
loss = F.cross_entropy(logits.view(-1, V), tgt.reshape(-1))
loss.backward()
losses = [loss.item()]
params = [torch.nn.Parameter(flat[t["offset"]:t["offset"] + t["count"]].clone()) for t in tensors]
opt = torch.optim.AdamW([{"params": [p for p, t in zip(params, tensors) if t["decay"]], "weight_decay": 0.1},
                         {"params": [p for p, t in zip(params, tensors) if not t["decay"]], "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
for _ in range(STEPS):
    opt.zero_grad()
    l = F.cross_entropy(checker.forward(checker.views(torch.cat([p.view(-1) for p in params]), meta), meta, idx)
                        .view(-1, V), tgt.reshape(-1))
    l.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    losses.append(l.item())


def write(d, logits_np, grads_np, losses_list):
    json.dump(meta, open(f"{d}/meta.json", "w"))
    flat.numpy().astype(np.float32).tofile(f"{d}/params.bin")
    ids.numpy().tofile(f"{d}/tokens.bin")
    logits_np.astype(np.float32).tofile(f"{d}/logits.bin")
    grads_np.astype(np.float32).tofile(f"{d}/grads.bin")
    open(f"{d}/losses.txt", "w").write("\n".join(f"{x:.9g}" for x in losses_list) + "\n")


good_logits, good_grads = logits.detach().numpy(), leaf.grad.numpy()
failures = []
with tempfile.TemporaryDirectory() as d:
    write(d, good_logits, good_grads, losses)
    if checker.check_dir(d, "cpu"):
        failures.append("correct outputs were rejected")
    bad = good_grads.copy()
    o = tensors[6]["offset"]  # attprojw
    bad[o:o + 10] *= 1.05
    write(d, good_logits, bad, losses)
    if "grad attprojw max rel error" not in checker.check_dir(d, "cpu"):
        failures.append("a 5% error in one gradient was not caught")
    bad_logits = good_logits.copy()
    bad_logits.flat[123] += 0.01
    write(d, bad_logits, good_grads, losses)
    if "logits max rel error" not in checker.check_dir(d, "cpu"):
        failures.append("a wrong logit was not caught")
    write(d, good_logits, good_grads, losses[:5] + [losses[5] + 0.01] + losses[6:])
    if "10-step losses max abs error" not in checker.check_dir(d, "cpu"):
        failures.append("a wrong training loss was not caught")
print("FAILED: " + "; ".join(failures) if failures else "PASSED: checker accepts the reference and rejects errors")
sys.exit(1 if failures else 0)
