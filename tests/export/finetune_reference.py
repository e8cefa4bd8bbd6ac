"""The reference side of `train --init-from` fine-tunes (hf_finetune_test.py, import_qwen3_moe_test.py):
the runtime's batches from the sampler's definition (runtime/data/sampler.cpp), its learning-rate
schedule (linear warm-up, cosine to min_lr) and torch's AdamW with global-norm clipping, no decay
on norm weights, over a model written in the test; and the trident side, whose metrics give the
losses."""
import json
import math
import os
import subprocess

import numpy as np
import torch

M = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


class Sampler:
    """The runtime's batches: the last 10% of the tokens is validation; sequence i of step s starts
    at mix64(mix64(mix64(seed) + s) + i) mod (train - T)."""

    def __init__(self, ids, T, seed):
        self.tokens, self.T, self.seed = np.array(ids, dtype=np.int64), T, seed
        val = min(max(int(len(self.tokens) * 0.1), T + 1), len(self.tokens) // 2)
        self.positions = len(self.tokens) - val - T

    def batch(self, step, first, count):
        T, s0 = self.T, mix64(self.seed)
        starts = [mix64((mix64((s0 + step) & M) + first + i) & M) % self.positions for i in range(count)]
        return (torch.tensor(np.stack([self.tokens[s:s + T] for s in starts])),
                torch.tensor(np.stack([self.tokens[s + 1:s + T + 1] for s in starts])))


def lr_at(opt, steps, step):
    if step < opt["warmup"]:
        return opt["lr"] * (step + 1) / opt["warmup"]
    progress = (step - opt["warmup"]) / (steps - opt["warmup"])
    return opt["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (opt["lr"] - opt["min_lr"])


def train_args(ck, data, steps, B, b, seed, opt):
    return ["train", "--init-from", ck, "--data", data, "--steps", str(steps), "--global-batch-size", str(B),
            "--micro-batch-size", str(b), "--lr", str(opt["lr"]), "--min-lr", str(opt["min_lr"]),
            "--warmup", str(opt["warmup"]), "--weight-decay", str(opt["weight_decay"]),
            "--grad-clip", str(opt["grad_clip"]), "--seed", str(seed), "--eval-every", str(steps)]


def trident_losses(trident, args, metrics, launcher=(), layout=()):
    cmd = [*launcher, trident, *args, *layout, "--metrics", metrics]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600, env=env)
    if p.returncode != 0:
        raise SystemExit(f"FAIL {' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    rows = [json.loads(line) for line in open(metrics)]
    return [r["loss"] for r in rows if "loss" in r and "step" in r]


def reference_losses(weights, loss_of, sampler, steps, B, b, opt, after_step=None):
    """Fine-tunes a copy of weights {name: tensor}: loss_of(params, x, y) is one sequence's mean
    cross-entropy; the step's loss is the mean over the B sequences (micro-batches of b).
    after_step(): called after each optimizer step (DeepSeek-V3's expert-bias update)."""
    params = {n: t.clone().requires_grad_(True) for n, t in weights.items()}
    norms = [t for n, t in params.items() if "norm" in n]  # RMSNorm weights (QK-norm's too) do not decay
    optim = torch.optim.AdamW([{"params": [t for n, t in params.items() if "norm" not in n],
                                "weight_decay": opt["weight_decay"]}, {"params": norms, "weight_decay": 0.0}],
                              lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    losses = []
    for step in range(steps):
        optim.zero_grad()
        total = 0.0
        for micro in range(B // b):
            x, y = sampler.batch(step, micro * b, b)
            loss = sum(loss_of(params, x[i], y[i]) for i in range(b)) / b
            (loss / (B // b)).backward()
            total += loss.item() / (B // b)
        losses.append(total)
        norm = torch.sqrt(sum((t.grad.double() ** 2).sum() for t in params.values())).item()
        if norm > opt["grad_clip"]:  # global-norm clipping: scaled to the limit
            for t in params.values():
                t.grad.mul_(opt["grad_clip"] / norm)
        for g in optim.param_groups:
            g["lr"] = lr_at(opt, steps, step)
        optim.step()
        if after_step:
            after_step()
    return losses
