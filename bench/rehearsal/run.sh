#!/usr/bin/env bash
# The EP all-to-all of the Mixtral example's rehearsal against the planner's prediction, over
# several launches (a 2-core machine's timings move from launch to launch: one run proves little).
# Plans examples/mixtral-8x22b-8-dgx-h100.toml, writes the best layout, rehearses it RUNS times
# (default 5) and prints, per run: the bench's all-to-all call, the EP all-to-all's median per step
# measured and predicted with their ratio, and its share of the step (means over steps) measured
# and predicted; then how many runs fall within 25% on each.
# usage: bench/rehearsal/run.sh [BUILD_DIR] [RUNS]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-5}
TRIDENT=$BUILD/src/cli/trident
[ -x "$TRIDENT" ] || { echo "build trident first (make build)"; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$TRIDENT" plan --config "$ROOT/examples/mixtral-8x22b-8-dgx-h100.toml" --emit "$OUT/best.toml" >/dev/null
echo "examples/mixtral-8x22b-8-dgx-h100.toml, $(sed -n 's/^# Written by trident plan: \(.*\)\.$/\1/p' "$OUT/best.toml"), rehearsed $RUNS times"
for i in $(seq 1 "$RUNS"); do
  "$TRIDENT" rehearse --config "$OUT/best.toml" --steps 24 --out "$OUT/run$i" >"$OUT/run$i.txt" 2>&1 ||
    { echo "run $i: rehearse failed (exit $?), see:"; tail -20 "$OUT/run$i.txt"; exit 1; }
  sed -n 's/.*alltoall_efficiency: an all-to-all of \([0-9.]* MiB\) over the \([0-9]*\) ranks, \([0-9.]* us\).*/\1 over \2 ranks: \3/p' \
    "$OUT/run$i.txt" >"$OUT/run$i.bench"
done
/usr/bin/python3 - "$OUT" "$RUNS" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
print(f"{'run':>3} {'bench call':>28} {'median ms meas/pred':>20} {'ratio':>6} {'share meas/pred':>16} {'ratio':>6}")
within_ms = within_share = 0
for i in range(1, runs + 1):
    verdict = json.load(open(f"{out}/run{i}/verdict.json"))
    report = json.load(open(f"{out}/run{i}/report.json"))
    ep = next(t for t in verdict["terms"] if t["key"] == "ep")
    m, p = ep["measured_median_s"] * 1e3, ep["predicted_s"] * 1e3
    sm, sp = report["measured"]["shares"]["ep_alltoall"], report["predicted"]["shares"]["ep_alltoall"]
    r_ms, r_share = m / p, sm / sp
    within_ms += abs(r_ms - 1) <= 0.25
    within_share += abs(r_share - 1) <= 0.25
    bench = open(f"{out}/run{i}.bench").read().strip()
    print(f"{i:>3} {bench:>28} {m:>9.3f} / {p:<8.3f} {r_ms:>6.2f} {100*sm:>6.2f}% / {100*sp:<5.2f}% {r_share:>6.2f}")
print(f"within 25%: median per step in {within_ms} of {runs} runs, share of the step in {within_share} of {runs}")
PY
