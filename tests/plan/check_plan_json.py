"""Reads `trident plan --json` on stdin and checks the interface scripts depend on."""
import json
import sys

doc = json.load(sys.stdin)
want_top = int(sys.argv[1])
candidates = doc["candidates"]
assert len(candidates) == want_top, f"{len(candidates)} candidates, wanted {want_top}"
assert len(doc["rationale"]) >= 5, doc["rationale"]
for c in candidates:
    for key in ("layout", "fits", "memory_gib", "time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "findings"):
        assert key in c, f"missing {key}"
    for key in ("weights", "gradients", "optimizer", "activations", "overhead", "total", "capacity"):
        assert key in c["memory_gib"], f"missing memory_gib.{key}"
    for key in ("step", "compute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer"):
        assert key in c["time_s"], f"missing time_s.{key}"
    for f in c["findings"]:
        assert set(f) == {"severity", "code", "message", "fix"}, f
    assert c["fits"] is True
    assert c["memory_gib"]["total"] <= c["memory_gib"]["capacity"]
    assert c["layout"]["tp"] <= 8
t = [c["tokens_per_s"] for c in candidates]
assert t == sorted(t, reverse=True), t
print("ok")
