"""NVIDIA's published Megatron-Bridge runs on DGX-B200 and DGX-GB200, each planned in its published
layout: predicted against published tokens/s per GPU, per row, per model and per release.

Every row of the file is printed with one status: `accepted` (estimated and fits), `not-fit` (the
planner says the layout does not fit in memory, with the memory it needs), `refused` (the planner
refuses the layout or the model, with its reason) or `cannot-express` (the model, precision or
recipe has something Trident does not model: what is missing is named). Only accepted rows enter the
errors. The layout is the row's (tp, pp, cp, ep, vp, micro-batch, global batch, sequence, GPUs);
the settings a row does not state are the `megatron-core-te` stack's (Megatron-Bridge's recipes
run Megatron-Core with Transformer Engine: distributed optimizer, flash attention, overlaps), ZeRO 3
where the row names FSDP. Recomputation: the row's when stated (full; or selective with its
recompute_modules, Megatron-Core's --recompute-modules), else the cheapest that fits by one rule for
every row: of none, selective (Megatron's default core_attn), each module set of RECOMPUTE_SETS the
model has, and full, the one with the highest predicted throughput among those that fit (the least
recompute time): said in the row's note.

Fitted or held out: one constant of the cost model is fitted to rows of this file: the host's issue
time per kernel (host_launch_us, data/cost/builtin.toml), on the Qwen3-30B-A3B rows of release 26.02
(FIT_HOST_ROWS: micro-batch 1 on B200 and 4 on GB200, both CUDA-graphing the router alone). The
other built-in constants are fitted to the NeMo H100 rows and the NeMo 25.02 GB200 BF16 row of
data/calibration/. Every other row is held out; the `fit` column says which, and the summaries give
the fitted and the held-out rows apart. --fit-host searches host_launch_us again on FIT_HOST_ROWS
(the value it prints is what builtin.toml holds).

usage: blackwell_error_table.py TRIDENT CSV [--json OUT] [--fit-host]
"""
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HF = os.path.join(ROOT, "data", "models", "hf")

# The model of each model_key: a config.json of data/models/hf or a preset, with its layer count
# (for Megatron's embedding / loss pipeline units).
MODELS = {
    "deepseek-v3-671b": (["--hf-config", os.path.join(HF, "deepseek-v3.json")], 61),
    "qwen3-30b-a3b": (["--hf-config", os.path.join(HF, "qwen3-30b-a3b.json")], 48),
    "qwen3-235b-a22b": (["--hf-config", os.path.join(HF, "qwen3-235b-a22b.json")], 94),
    "gpt-oss-120b": (["--hf-config", os.path.join(HF, "gpt-oss-120b.json")], 36),
    "llama3.1-405b": (["--hf-config", os.path.join(HF, "llama3.1-405b.json")], 126),
    "llama3-70b": (["--model", "llama3-70b"], 80),
    "llama3-8b": (["--model", "llama3-8b"], 32),
}
# Models Trident cannot describe, and what is missing (data/models/models.csv says what is known).
MISSING_MODEL = {
    "nemotron-3-nano-30b-a3b": "Mamba-2 layers (hybrid Mamba-2 / attention / MoE layer pattern)",
    "nemotron-3-super-120b-a12b": "Mamba-2 layers and LatentMoE (hybrid pattern); its architecture is not collected",
    "nemotron-3-ultra-550b-a55b": "Mamba-2 layers and LatentMoE (hybrid pattern); its architecture is not collected",
    "nemotron-3.5-lightning-30b-a3b": "its architecture (no authoritative config collected)",
    "deepseek-v4-flash": "its architecture (no authoritative config collected)",
}
# The rows host_launch_us is fitted on: (model_key, release).
FIT_HOST_ROWS = {("qwen3-30b-a3b", "26.02")}
SYSTEMS = {"DGX-B200": ("dgx-b200", 8), "DGX-GB200": ("gb200-nvl72", 4)}
# Hosts per NVLink domain: NVIDIA's pages do not say how the GB200 trays group into racks; as
# data/calibration (README, nemo-gb200-llama31-405b) and examples/llama3-405b-gb200-nvl72.toml,
# 16 trays (64 GPUs) per rack, so that ep 32 / 64 groups tile the racks (the NVL72's 72 GPUs are
# 18 trays; jobs use 16 of them). What the published layouts need, planned both ways (held-out
# rows, 26.06.01, main's planner): at 18 trays per domain the 256-GPU jobs' ep groups straddle
# racks (8 of their members in the fewest-held domain) and the all-to-all goes over the network:
# DeepSeek-V3 ep 64 (R0020) 2714 -> 1425 tokens/s/GPU (published 4928), Qwen3-235B ep 32 (R0026)
# 7319 -> 4567 (published 7360); gpt-oss-120b ep 64 on 64 GPUs (R0022) fits one rack either way
# (38337). The published figures need every ep group inside one NVLink domain: 16 trays per rack.
HOSTS_PER_NVLINK_DOMAIN = {"DGX-B200": 1, "DGX-GB200": 16}
# Published precision -> Trident's, and the note when it is an approximation.
PRECISIONS = {
    "BF16": ("bf16", ""),
    "FP8": ("fp8", ""),
    "FP8-CS": ("fp8", ""),
    "MXFP8": ("mxfp8", ""),
    "FP8-MX": ("mxfp8", ""),
    "NVFP4": ("nvfp4", ""),
    "": ("fp8", "precision unstated (25.09 table, FP8 with MXFP8 variants in parentheses): planned as fp8"),
}
MISSING_PRECISION = {}


def settings(row):
    """recipe_settings as a dict: 'a=1; b=[x, y]' -> {'a': '1', 'b': '[x, y]'}."""
    out = {}
    for part in row["recipe_settings"].split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def whole(text, default):
    return int(text) if text not in ("", "n/a", "None") else default


def missing(row, s):
    """What Trident cannot express of a row (empty: it can)."""
    out = []
    if row["model_key"] in MISSING_MODEL:
        out.append(MISSING_MODEL[row["model_key"]])
    elif row["model_key"] not in MODELS:
        out.append(f"model '{row['model_key']}' (no config in data/models/hf)")
    if row["precision"] in MISSING_PRECISION:
        out.append(MISSING_PRECISION[row["precision"]])
    elif row["precision"] not in PRECISIONS:
        out.append(f"precision '{row['precision']}'")
    if s.get("peft", "none") not in ("none", ""):
        out.append(f"parameter-efficient fine-tuning ({s['peft']}: frozen base weights)")
    if whole(s.get("cpu_offloading_num_layers", ""), 0) > 0:
        out.append(f"activation offloading to the CPU ({s['cpu_offloading_num_layers']} layers)")
    if row["system"] not in SYSTEMS:
        out.append(f"system '{row['system']}'")
    return out


# The per-layer graph scopes Trident models (Megatron-Core's names); the others name parts of
# models it cannot express (mamba) and are left out with a note.
GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess")


def cuda_graph_arguments(s, notes):
    """The recipe's CUDA graphs: cuda_graph_impl with its cuda_graph_scope list (the scope full_iteration
    with the local implementation graphs the whole step), 25.09's cuda_graphs=True (Megatron-Core's
    --enable-cuda-graph: the local implementation, whole layers); unstated or none: no graphs."""
    impl = s.get("cuda_graph_impl", "local" if s.get("cuda_graphs") == "True" else "none")
    scopes = [x.strip(" '\"") for x in s.get("cuda_graph_scope", "").strip("[]").split(",") if x.strip(" '\"")]
    if impl == "none":
        return []
    if impl == "local" and "full_iteration" in scopes:
        impl = "full_iteration"
    args = ["--cuda-graphs", impl.replace("_", "-")]
    kept = [x for x in scopes if x in GRAPH_SCOPES]
    if impl != "full_iteration" and kept:
        args += ["--cuda-graph-scope", ",".join(kept)]
    left = [x for x in scopes if x not in GRAPH_SCOPES and x not in ("full", "full_iteration")]
    notes.append(f"CUDA graphs {impl}" + (f" ({', '.join(kept)})" if kept and impl != "full_iteration" else "")
                 + (f"; scope {', '.join(left)} not modelled" if left else ""))
    return args


def arguments(row, s):
    """The row's layout and recipe as trident arguments, and the notes on approximations."""
    model_args, layers = MODELS[row["model_key"]]
    cluster, per_node = SYSTEMS[row["system"]]
    gpus = int(row["num_gpus"])
    tp, pp, cp = whole(row["tp"], 1), whole(row["pp"], 1), whole(row["cp"], 1)
    ep, vp = whole(row["ep"], 1), whole(row["vp"], 1)
    dp = whole(row["dp"], gpus // (tp * pp * cp))
    precision, note = PRECISIONS[row["precision"]]
    notes = [note] if note else []
    args = [*model_args, "--seq-len", row["seq_len"], "--cluster", cluster, "--nodes", str(max(gpus // per_node, 1)),
            "--tp", str(tp), "--pp", str(pp), "--cp", str(cp), "--dp", str(dp), "--ep", str(ep),
            "--global-batch-size", row["gbs"], "--micro-batch-size", row["mbs"], "--precision", precision,
            "--stack", "megatron-core-te", "--hosts-per-nvlink-domain", str(HOSTS_PER_NVLINK_DOMAIN[row["system"]])]
    if gpus % per_node:
        notes.append(f"{gpus} GPUs are not whole {cluster} nodes of {per_node}")
    if pp > 1:
        args += ["--schedule", "interleaved", "--virtual-stages", str(vp)] if vp > 1 else ["--schedule", "1f1b"]
    chunks = pp * max(vp, 1)
    if s.get("pp_layout"):
        # The recipe's pipeline layout (Megatron-Core's --pipeline-model-parallel-layout).
        args += ["--pipeline-layout", s["pp_layout"]]
        notes.append(f"pp layout {s['pp_layout']} (the recipe's)")
    elif chunks > 1 and layers % chunks and (layers + 2) % chunks == 0:
        # Megatron-Bridge counts the embedding and the loss as pipeline units (its Llama recipes).
        args += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        notes.append("embedding and loss as pipeline units")
    if row["is_moe"] in ("1", "True", "true", "yes"):
        # The MoE step as the row's recipe states it: flex with its backend (moe_flex_dispatcher_backend),
        # the EP communication overlap (moe_a2a_overlap); unstated: Megatron-Bridge's alltoall, not
        # overlapped. Routing force-balanced, as the pages say of every MoE benchmark.
        backend = s.get("moe_flex_dispatcher_backend", "")
        args += ["--moe-dispatcher", backend if backend in ("deepep", "hybridep") else "alltoall",
                 "--moe-load-imbalance", "1"]
        if backend:
            notes.append(f"dispatcher flex ({backend})")
        if s.get("moe_a2a_overlap") == "True":
            args += ["--moe-ep-overlap"]
            notes.append("EP all-to-alls overlapped (moe_a2a_overlap)")
    args += cuda_graph_arguments(s, notes)
    fsdp = whole(row["fsdp"], 0) > 0 or s.get("use_megatron_fsdp") == "True"
    args += ["--zero", "3" if fsdp else "1"]
    return args, notes


# Selective recompute module sets tried where a row states no recompute: each modelled module alone
# and the sets NVIDIA's recipes publish (data/published_runs: DeepSeek-V3 mla_up_proj, mlp,
# mla_up_proj+mlp; gpt-oss layernorm+moe_act), then all of them. A set naming a module the model
# lacks (mla_up_proj without MLA, moe_act without experts) is refused by the planner and skipped.
RECOMPUTE_SETS = ["core_attn", "mla_up_proj", "moe_act", "layernorm", "mlp", "mla_up_proj,mlp", "layernorm,moe_act",
                  "mla_up_proj,moe_act,layernorm", "core_attn,mla_up_proj,moe_act,layernorm,mlp"]


def modules_of(s):
    """The row's recompute_modules as trident's list ('' when unstated)."""
    return ",".join(x.strip(" '\"") for x in s.get("recompute_modules", "").strip("[]").split(",") if x.strip(" '\""))


def recompute_tries(s):
    """(label, trident arguments) of each recompute setting to plan the row with, and whether stated."""
    if s.get("model.recompute_granularity") == "full" or s.get("recompute_granularity") == "full":
        return [("full", ["--recompute", "full"])], True
    if s.get("recompute_granularity") == "None":  # the recipe says: no recompute
        return [("none", ["--recompute", "none"])], True
    if modules_of(s):
        return [(f"selective ({modules_of(s)})", ["--recompute", "selective", "--recompute-modules", modules_of(s)])], True
    return ([("none", ["--recompute", "none"]), ("selective", ["--recompute", "selective"])] +
            [(f"selective ({x})", ["--recompute", "selective", "--recompute-modules", x]) for x in RECOMPUTE_SETS] +
            [("full", ["--recompute", "full"])]), False


def lint(trident, args):
    p = subprocess.run([trident, "lint", "--json", *args], capture_output=True, text=True)
    if p.returncode == 2 or not p.stdout.strip():
        return None, " ".join(p.stderr.split())[:300] or f"exit {p.returncode}"
    return json.loads(p.stdout), ""


def plan_row(trident, row, extra=()):
    s = settings(row)
    gaps = missing(row, s)
    result = {"run_id": row["run_id"], "release": row["release"], "model": row["model_key"], "system": row["system"],
              "gpus": int(row["num_gpus"]), "precision": row["precision"] or "?",
              "layout": f"tp{row['tp']} pp{row['pp']} cp{row['cp']} ep{row['ep']} vp{row['vp']} mbs{row['mbs']} gbs{row['gbs']}",
              "published": float(row["tokens_per_sec_per_gpu"]),
              "fit": "fitted" if (row["model_key"], row["release"]) in FIT_HOST_ROWS else "held out", "notes": []}
    if gaps:
        result.update(status="cannot-express", reason="missing: " + "; ".join(gaps))
        return result
    args, notes = arguments(row, s)
    args += list(extra)
    result["notes"] = notes
    tries, stated = recompute_tries(s)
    best, last_mem = None, None
    for i, (label, rc_args) in enumerate(tries):
        j, refusal = lint(trident, [*args, *rc_args])
        if j is None:
            if i == 0:  # the row's own (or no) recompute refused: the row is
                result.update(status="refused", reason=refusal)
                return result
            continue  # a module set the model lacks
        errors = [f for f in j["findings"] if f["severity"] == "error"]
        if [f for f in errors if f["code"] != "out-of-memory"]:
            if i == 0:
                result.update(status="refused", reason="; ".join(f"{f['code']}: {f['message']}" for f in errors)[:300])
                return result
            continue
        if j["fits"] and not errors:
            if best is None or j["tokens_per_s"] > best[1]["tokens_per_s"]:
                best = (label, j, i)
            if i == 0 and not stated:
                break  # none fits: nothing to recompute
        else:
            last_mem = (label, j["memory_gib"])
    if best is not None:
        label, j, i = best
        if stated:
            result["notes"].append(f"recompute {label} (the recipe's)")
        elif i > 0:
            result["notes"].append(f"recompute {label} (none does not fit; the recipe's is not stated: the fastest that fits)")
        result.update(status="accepted", recompute=label, predicted=j["tokens_per_s"] / result["gpus"], reason="")
        result["error"] = result["predicted"] / result["published"] - 1
        return result
    label, mem = last_mem
    result.update(status="not-fit", recompute=label,
                  reason=f"needs {mem['total']:.1f} GiB of {mem['capacity']:.1f} GiB per GPU (recompute {label})")
    return result


def summary(rows, key):
    groups = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    out = []
    for k in sorted(groups):
        g = groups[k]
        ok = [abs(r["error"]) for r in g if r["status"] == "accepted"]
        out.append({"group": k, "rows": len(g), "accepted": len(ok),
                    "not_fit": sum(r["status"] == "not-fit" for r in g),
                    "refused": sum(r["status"] == "refused" for r in g),
                    "cannot_express": sum(r["status"] == "cannot-express" for r in g),
                    "mean_abs_error": sum(ok) / len(ok) if ok else None, "max_abs_error": max(ok) if ok else None})
    return out


def release_key(release):
    return tuple(int(x) for x in release.split("."))


def fit_host(trident, rows):
    """host_launch_us minimising the mean |error| of the FIT_HOST_ROWS rows: 1 to 150 us by 1 us."""
    fit = [r for r in rows if (r["model_key"], r["release"]) in FIT_HOST_ROWS]
    best = None
    for us in range(1, 151):
        errs = [plan_row(trident, r, ["--host-launch-us", str(us)]) for r in fit]
        errs = [abs(e["error"]) for e in errs if e["status"] == "accepted"]
        if len(errs) == len(fit) and (best is None or sum(errs) / len(errs) < best[1]):
            best = (us, sum(errs) / len(errs))
    print(f"host_launch_us fitted on {len(fit)} rows ({', '.join(r['run_id'] for r in fit)}): "
          f"{best[0]:g} us, mean |error| {100 * best[1]:.1f}%" if best else "host_launch_us: no value plans every fitted row")
    return best


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    trident, path = sys.argv[1], sys.argv[2]
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith("#")))
    if "--fit-host" in sys.argv:
        fit_host(trident, rows)
        return
    results = [plan_row(trident, r) for r in rows]
    results.sort(key=lambda r: (r["model"], release_key(r["release"]), r["run_id"]))
    print(f"{len(results)} published runs of {os.path.basename(path)}, each planned in its layout "
          "(predicted / published tokens/s per GPU - 1; fit: host_launch_us fitted on the rows marked fitted, "
          "every other row held out)")
    print(f"{'run':6} {'release':9} {'model':28} {'system':9} {'gpus':>4} {'prec':6} {'layout':38} "
          f"{'published':>9} {'predicted':>9} {'error':>7}  {'fit':8}  status: reason / notes")
    for r in results:
        pred = f"{r['predicted']:9.0f}" if "predicted" in r else f"{'-':>9}"
        err = f"{100 * r['error']:+6.1f}%" if "error" in r else f"{'-':>7}"
        detail = "; ".join(x for x in [r.get("reason", "")] + r["notes"] if x)
        print(f"{r['run_id']:6} {r['release']:9} {r['model']:28} {r['system'][4:]:9} {r['gpus']:4} {r['precision']:6} "
              f"{r['layout']:38} {r['published']:9.0f} {pred} {err}  {r['fit']:8}  {r['status']}"
              + (f": {detail}" if detail else ""))
    latest = max((r["release"] for r in results), key=release_key, default="")

    def table(title, groups):
        print(f"\n{title}")
        print(f"{'':34} {'rows':>4} {'accepted':>8} {'not-fit':>7} {'refused':>7} {'cannot':>6} {'mean|err|':>9} {'max|err|':>8}")
        for g in groups:
            mean = f"{100 * g['mean_abs_error']:8.1f}%" if g["mean_abs_error"] is not None else f"{'-':>9}"
            mx = f"{100 * g['max_abs_error']:7.1f}%" if g["max_abs_error"] is not None else f"{'-':>8}"
            print(f"{g['group']:34} {g['rows']:4} {g['accepted']:8} {g['not_fit']:7} {g['refused']:7} "
                  f"{g['cannot_express']:6} {mean} {mx}")
    per_model = summary(results, lambda r: r["model"])
    per_release = summary(results, lambda r: r["release"])
    per_model_latest = summary([r for r in results if r["release"] == latest], lambda r: r["model"])
    every = summary(results, lambda r: "all rows") + summary(results, lambda r: r["fit"] + " rows")
    table("Per model (all releases; errors of accepted rows)", per_model)
    table("Per release", sorted(per_release, key=lambda g: release_key(g["group"])))
    table(f"Latest release {latest}, per model", per_model_latest)
    table("Everything", every)
    if "--json" in sys.argv:
        out = sys.argv[sys.argv.index("--json") + 1]
        with open(out, "w") as f:
            json.dump({"rows": results, "per_model": per_model, "per_release": per_release,
                       "latest_release": latest, "per_model_latest": per_model_latest, "all": every}, f, indent=1)


if __name__ == "__main__":
    main()
