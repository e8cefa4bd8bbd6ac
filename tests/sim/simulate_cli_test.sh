#!/usr/bin/env bash
# trident simulate end to end: the table, the JSON keys, the pictures, and bad input (exit 2).
set -u
T="$1"; ROOT="$2"; OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
CFG="$ROOT/examples/gpt3-175b-4096-a100.toml"

"$T" simulate --config "$CFG" --trace "$OUT/t.json" --svg "$OUT/t.svg" > "$OUT/table.txt" || fail "simulate exit $?"
grep -q "step time *simulator" "$OUT/table.txt" || fail "no step time line"
grep -q "planner" "$OUT/table.txt" || fail "no planner step"
[ -s "$OUT/t.json" ] && [ -s "$OUT/t.svg" ] || fail "trace or svg missing"
grep -q '"traceEvents"' "$OUT/t.json" || fail "trace has no traceEvents"
grep -q '</svg>' "$OUT/t.svg" || fail "svg not closed"

"$T" simulate --config "$CFG" --json > "$OUT/out.json" || fail "json exit $?"
/usr/bin/python3 - "$OUT/out.json" <<'PY' || fail "json keys"
import json, sys
j = json.load(open(sys.argv[1]))
for k in ["step_s", "bubble_share", "stages", "exposed_comm_s", "planner_step_s"]:
    assert k in j, k
assert set(j["exposed_comm_s"]) >= {"tp", "pp", "dp"}
assert len(j["stages"]) == 8 and all({"stage", "busy_s", "idle_s"} <= set(s) for s in j["stages"])
assert abs(j["step_s"] - j["planner_step_s"]) < 0.05 * j["planner_step_s"]
assert 0 < j["bubble_share"] < 0.5
PY

# Interleaving with m = 1000/64 -> not a whole number: batch error; m = 24 with pp 8 is fine;
# m = 20 (global 1280) is not a multiple of 8: exit 2 with the nearest valid batches.
"$T" simulate --config "$CFG" --schedule interleaved --global-batch-size 1280 > "$OUT/bad.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "interleaved m=20 p=8 exit $rc, want 2"
grep -q "multiple of pipeline stages" "$OUT/bad.txt" || fail "no reason: $(cat "$OUT/bad.txt")"
grep -q "1024" "$OUT/bad.txt" && grep -q "1536" "$OUT/bad.txt" || fail "no nearest valid batch: $(cat "$OUT/bad.txt")"

"$T" simulate --config "$CFG" --schedule 1f1b --virtual-stages 2 > "$OUT/bad2.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "1f1b with v=2 exit $rc, want 2"
echo "ok"
