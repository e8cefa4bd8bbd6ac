"""What both export tests share: the trident binary, a scratch folder, check/run and a reader of
safetensors files written independently of Trident's writer (the format's spec: an 8-byte header
length, a JSON header of dtype/shape/data_offsets, then the bytes)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, finish  # noqa: E402

trident = sys.argv[1]
tmp = tempfile.mkdtemp()


def run(*args, want=0):
    p = subprocess.run([trident, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != want:
        raise SystemExit(f"FAIL {' '.join(args)}: exit {p.returncode}, want {want}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
    return p


def load_safetensors(path):
    """(tensors by name as float32 torch tensors, the __metadata__ dict)"""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", h
        b, e = h["data_offsets"]
        tensors[name] = torch.from_numpy(np.frombuffer(raw[base + b:base + e], dtype="<f4").copy()).reshape(h["shape"])
    return tensors, header.get("__metadata__", {})

