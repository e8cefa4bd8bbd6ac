"""The trainer's YaRN against Hugging Face's _compute_yarn_parameters and DeepSeek-V3's
modeling code (yarn_reference.py), on the shipped DeepSeek-V3 and GPT-OSS config.json files
(data/models/hf): rope_freq_dump reads each config as `trident train --hf-config` does and prints
each pair's frequency, the attention factor, MLA's softmax multiplier and the CPU rope kernel's
rotation of (1, 0) at positions up to 131071. Exit 0 when all agree; else prints each mismatch.

usage: yarn_freq_test.py ROPE_FREQ_DUMP CONFIG.json..."""
import json
import math
import subprocess
import sys

import torch

from yarn_reference import deepseek_softmax_multiplier, deepseek_yarn, hf_yarn_parameters

dump, configs = sys.argv[1], sys.argv[2:]
out = json.loads(subprocess.run([dump] + configs, check=True, capture_output=True, text=True).stdout)
failures = []


def check(what, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    if not ok:
        failures.append(what)


for path, got in zip(configs, out):
    cfg = json.load(open(path))
    rs, base = cfg["rope_scaling"], cfg["rope_theta"]
    dim = cfg.get("qk_rope_head_dim") or cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    name = cfg.get("model_type", path)
    check(f"{name} rotary width", got["dim"] == dim, f"{got['dim']} vs {dim}")
    inv, attn = hf_yarn_parameters(rs, base, dim, cfg.get("max_position_embeddings"), torch.float64)
    inv32, _ = hf_yarn_parameters(rs, base, dim, cfg.get("max_position_embeddings"))
    mine = torch.tensor(got["inv_freq"], dtype=torch.float64)
    rel = ((mine - inv).abs() / inv).max().item()
    rel32 = ((mine - inv32.double()).abs() / inv32.double()).max().item()
    # The formula in float64: Trident's frequencies are its float32 rounding.
    check(f"{name} inv_freq vs HF's formula in float64 (relative)", rel < 1.2e-7, f"max {rel:.2e} over {dim // 2} "
          f"pairs, from {inv[0].item():.6g} to {inv[-1].item():.6g}")
    # As Hugging Face computes it in float32: its ramp's 1 - (1 - r) carries ~6e-8 of the extrapolated
    # frequency (factor x the interpolated one) into the blended pairs.
    check(f"{name} inv_freq vs HF in float32 (relative)", rel32 < 3e-6, f"max {rel32:.2e}")
    check(f"{name} attention factor vs HF", abs(got["attention_factor"] - attn) < 1e-6 * attn,
          f"{got['attention_factor']:.9g} vs {attn:.9g}")
    if "mscale_all_dim" in rs:  # DeepSeek-V3's own code agrees with Hugging Face's on its config
        dinv, dattn = deepseek_yarn(rs, base, dim)
        drel = ((mine - dinv.double()).abs() / dinv.double()).max().item()
        check(f"{name} inv_freq vs modeling_deepseek in float32 (relative)", drel < 3e-6, f"max {drel:.2e}")
        check(f"{name} cos/sin mscale vs modeling_deepseek", abs(got["attention_factor"] - dattn) < 1e-6,
              f"{got['attention_factor']:.9g} vs {dattn:.9g}")
        sm = deepseek_softmax_multiplier(rs)
        check(f"{name} MLA softmax multiplier vs modeling_deepseek", abs(got["softmax_multiplier"] - sm) < 1e-12 * sm,
              f"{got['softmax_multiplier']:.9g} vs {sm:.9g} (scale {cfg['qk_nope_head_dim'] + dim}^-0.5 x it)")
    # The kernel's rotation: a (cos, sin) of position x frequency; the angle's error grows with the
    # position by the frequencies' float rounding, so the tolerance does too.
    worst = 0.0
    for pos, vec in got["rotated"].items():
        p = int(pos)
        ang = p * inv
        want = torch.stack([attn * ang.cos(), attn * ang.sin()], dim=-1).flatten()
        err = (torch.tensor(vec, dtype=torch.float64) - want).abs()
        tol = 2e-6 + attn * p * (mine - inv).abs()
        tol = torch.stack([tol, tol], dim=-1).flatten()
        worst = max(worst, err.max().item())
        if not bool((err <= tol).all()):
            check(f"{name} rotation at position {p}", False, f"max error {err.max().item():.2e}")
    check(f"{name} rope kernel rotation at positions 0..131071", True, f"max |error| {worst:.2e}")

print("\n".join("FAIL: " + f for f in failures))
sys.exit(1 if failures else 0)
