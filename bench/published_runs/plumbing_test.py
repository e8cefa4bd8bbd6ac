"""The Blackwell error table's plumbing: a row accepted, one refused by a layout rule, one that does
not fit, one whose model and one whose precision Trident cannot express each come out with that
status and its reason (none dropped, none counted as accepted), and the summaries count them and
average the accepted rows' errors only. The errors' values are not checked.
usage: plumbing_test.py TRIDENT CSV"""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common"))
from checks import check, finish  # noqa: E402

trident, source = sys.argv[1], sys.argv[2]
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "blackwell_error_table.py")
lines = [l for l in open(source) if not l.startswith("#")]
header = next(csv.reader([lines[0]]))
rows = {r["run_id"]: r for r in csv.DictReader(lines)}
base = rows["R0008"]  # Qwen3-30B-A3B on 8 GB200, 26.08
made = {
    "OK": dict(base, run_id="OK"),
    "EP3": dict(base, run_id="EP3", ep="3"),  # 3 divides neither the 128 experts nor dp 8: refused
    "BIG": dict(base, run_id="BIG", model_key="llama3.1-405b", is_moe="0", ep="n/a", mbs="1", gbs="64"),  # 405B on 8 GPUs
    "MAMBA": dict(base, run_id="MAMBA", model_key="nemotron-3-nano-30b-a3b"),
    "FP6": dict(base, run_id="FP6", precision="MXFP6"),
}
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "rows.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for r in made.values():
            w.writerow(r)
    out = os.path.join(tmp, "out.json")
    p = subprocess.run([sys.executable, script, trident, path, "--json", out], capture_output=True, text=True)
    check("the benchmark runs", p.returncode == 0, p.stderr[-1500:])
    j = json.load(open(out)) if p.returncode == 0 else {"rows": [], "per_model": [], "all": [{}]}
by = {r["run_id"]: r for r in j["rows"]}
check("every row comes out, none dropped", sorted(by) == sorted(made), sorted(by))
for run_id in made:
    check(f"{run_id} is in the printed table", any(l.startswith(run_id + " ") for l in p.stdout.splitlines()), p.stdout)
want = {"OK": "accepted", "EP3": "refused", "BIG": "not-fit", "MAMBA": "cannot-express", "FP6": "cannot-express"}
for run_id, status in want.items():
    r = by.get(run_id, {})
    check(f"{run_id}: {status}", r.get("status") == status, r)
ok = by.get("OK", {})
check("the accepted row's error is predicted / published - 1",
      ok.get("predicted", 0) > 0 and abs(ok.get("error", 9) - (ok.get("predicted", 0) / ok.get("published", 1) - 1)) < 1e-9, ok)
check("a refused row gives the planner's reason", "ep 3" in by.get("EP3", {}).get("reason", ""), by.get("EP3"))
check("a row that does not fit gives the memory it needs", "GiB" in by.get("BIG", {}).get("reason", ""), by.get("BIG"))
check("what cannot be expressed is named", "Mamba" in by.get("MAMBA", {}).get("reason", "")
      and "MXFP6" in by.get("FP6", {}).get("reason", ""), [by.get("MAMBA"), by.get("FP6")])
check("only accepted rows carry a prediction", all("predicted" not in by.get(k, {}) for k in ["EP3", "MAMBA", "FP6"]))
qwen = next((g for g in j["per_model"] if g["group"] == "qwen3-30b-a3b"), {})
check("the model's summary counts each status and averages the accepted rows only",
      qwen.get("rows") == 3 and qwen.get("accepted") == 1 and qwen.get("refused") == 1
      and qwen.get("cannot_express") == 1 and abs(qwen.get("mean_abs_error", -1) - abs(ok.get("error", 0))) < 1e-12, qwen)
every = j["all"][0]
check("the total counts all five rows", every.get("rows") == 5 and every.get("accepted") == 1 and every.get("not_fit") == 1
      and every.get("refused") == 1 and every.get("cannot_express") == 2, every)
finish()
