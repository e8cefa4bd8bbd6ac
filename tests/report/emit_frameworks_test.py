"""trident plan --emit megatron / torchtitan / torchtitan-toml / slurm on the examples' plans
(GPT-3 175B, Llama 3 405B with cp, Mixtral with ep, an fp8 plan, ZeRO plans): every emitted flag
or key exists in the framework's own definitions (data/frameworks/*.tsv, read from their sources)
with a value of its kind and choices; the framework's validation rules (data/frameworks/*-rules.toml)
hold; the settings mean the planned job (layout, batch, precision, overlaps, model settings); what
a framework cannot express is refused (exit 2) with the reason. The sbatch script passes bash -n.
Usage: emit_frameworks_test.py TRIDENT ROOT"""
import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, failures, finish  # noqa: E402

trident, root = sys.argv[1], sys.argv[2]
data = os.path.join(root, "data", "frameworks")
ex = lambda name: os.path.join(root, "examples", name)


def run(*args, want=0):
    p = subprocess.run([trident, *args], capture_output=True, text=True)
    if p.returncode != want:
        print(f"FAIL exit {p.returncode} (want {want}): trident {' '.join(args)}\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        failures.append("exit code of " + " ".join(args))
    return p


def rows(name):
    lines = [l for l in open(os.path.join(data, name)) if not l.startswith("#")]
    header = lines[0].rstrip("\n").split("\t")
    return [dict(zip(header, l.rstrip("\n").split("\t"))) for l in lines[1:]]


def python_default(text):
    m = re.match(r"<\w+\.(\w+): \d+>", text)  # an enum default: <AttnBackend.auto: 5>
    if m:
        return m.group(1)
    if text.startswith("field("):
        return []
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# --- Megatron-LM -----------------------------------------------------------------------------
MEGATRON = {r["flag"]: r for r in rows("megatron-args.tsv")}
MEGATRON_RULES = tomllib.load(open(os.path.join(data, "megatron-rules.toml"), "rb"))["rule"]


def megatron_value(row, words):
    """The parsed value of one flag as argparse would make it, or raises ValueError."""
    kind, choices = row["kind"], [c.split(".")[-1] for c in row["choices"].split(",") if c]
    if kind.startswith("flag("):
        if words:
            raise ValueError(f"switch {row['flag']} takes no value")
        return kind == "flag(true)"
    if "nargs" not in kind and len(words) != 1:
        raise ValueError(f"{row['flag']} takes one value, got {words}")
    base = kind.split()[0]
    conv = {"int": int, "float": float}.get(base, str)
    values = [conv(w) for w in words]
    for v in values:
        if choices and str(v) not in choices:
            raise ValueError(f"{row['flag']} {v} is not one of {choices}")
    return values if "nargs" in kind else values[0]


def parse_launch(text):
    """(env, [(flag, [values])], header comments) of a printed launch."""
    env, args, comments = {}, [], []
    body = []
    for line in text.splitlines():
        if line.startswith("# "):
            comments.append(line[2:])
        elif line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
        elif line.strip():
            body.append(line.rstrip("\\ "))
    words = shlex.split(" ".join(body))
    for w in words:
        if w.startswith("--"):
            args.append((w, []))
        else:
            args[-1][1].append(w)
    return env, args, comments


def world_of(comments):
    return int(re.search(r"world size (\d+)", "\n".join(comments)).group(1))


def check_megatron(name, text):
    env, args, comments = parse_launch(text)
    ns = {r["dest"]: python_default(r["default"]) for r in MEGATRON.values()}
    bad = []
    for flag, words in args:
        if flag not in MEGATRON:
            bad.append(f"{flag}: not an option of Megatron-LM")
            continue
        try:
            ns[MEGATRON[flag]["dest"]] = megatron_value(MEGATRON[flag], words)
        except ValueError as e:
            bad.append(str(e))
    check(f"{name}: every flag is Megatron's, with a valid value", not bad, bad)
    ns["world_size"] = world_of(comments)
    ns["data_parallel_size"] = ns["world_size"] // (
        ns["tensor_model_parallel_size"] * ns["pipeline_model_parallel_size"] * ns["context_parallel_size"])
    ns["env"] = env
    broken = [f"{r['id']}: {r['says']}" for r in MEGATRON_RULES if eval(r["when"], {}, ns) and not eval(r["require"], {}, ns)]
    check(f"{name}: Megatron's validation rules hold", not broken, broken)
    return ns


def plan_layout(*args):
    """The plan's layout, with the layers of each pipeline stage as the planner split them."""
    c = json.loads(run("plan", *args, "--json", "--top", "1", "--per-stage").stdout)["candidates"][0]
    return dict(c["layout"], stage_layers=[s["layers"] for s in c.get("stages", [])])


def effective_order(lay):
    """The rank order without the dimensions of size 1 (they place no group)."""
    return "-".join(d for d in lay["order"].split("-") if lay[d] > 1)


def megatron_stages(ns):
    """The layers of each pipeline stage as Megatron splits them (no interleaving)."""
    pp, layers = ns["pipeline_model_parallel_size"], ns["num_layers"]
    first, last = ns["decoder_first_pipeline_num_layers"], ns["decoder_last_pipeline_num_layers"]
    if first is None and last is None:
        return [layers // pp] * pp
    middle = (layers - (first or 0) - (last or 0)) // (pp - (first is not None) - (last is not None))
    return [first if first is not None else middle] + [middle] * (pp - 2) + [last if last is not None else middle]


def check_megatron_meaning(name, ns, lay, model):
    checks = {
        "layout": (ns["tensor_model_parallel_size"], ns["pipeline_model_parallel_size"], ns["context_parallel_size"],
                   ns["expert_model_parallel_size"], ns["data_parallel_size"])
        == (lay["tp"], lay["pp"], lay["cp"], lay["ep"], lay["dp"]),
        "batch": (ns["micro_batch_size"], ns["global_batch_size"]) == (lay["micro_batch_size"], lay["global_batch_size"]),
        "precision": (ns["bf16"], ns["fp16"], ns["fp8"]) == {
            "bf16": (True, False, None), "fp16": (False, True, None), "fp32": (False, False, None),
            "fp8": (True, False, "hybrid")}[lay["precision"]],
        "gradient reduction": ns["grad_reduce_in_bf16"] == (lay["grad_bits"] == 16 and lay["precision"] != "fp32"),
        "attention": ns["attention_backend"] == ("fused" if lay["attention"] == "flash" else "unfused"),
        "dp overlap": ns["overlap_grad_reduce"] == ("dp" in lay["overlap"]),
        "param gather overlap": ns["overlap_param_gather"] == ("dp" in lay["overlap"] and lay["zero"] >= 1),
        "tp overlap": ns["tp_comm_overlap"] == ("tp" in lay["overlap"] and lay["tp"] > 1),
        "pp overlap": ns["overlap_p2p_comm"] == (lay["schedule"] != "interleaved" or "pp" in lay["overlap"]),
        "sequence parallel": ns["sequence_parallel"] == (lay["sequence_parallel"] and lay["tp"] > 1),
        "zero": (ns["use_distributed_optimizer"], ns["use_megatron_fsdp"]) == (lay["zero"] >= 1, lay["zero"] >= 2),
        "recompute": ns["recompute_granularity"] == (None if lay["recompute"] == "none" else lay["recompute"]),
        "norm epsilon": ns["layernorm_epsilon"] == 1e-5,
    }
    default_order = effective_order(dict(lay, order="tp-cp-ep-dp-pp"))
    checks["rank order"] = effective_order(lay) == default_order if not ns["use_tp_pp_dp_mapping"] \
        else effective_order(lay) == effective_order(dict(lay, order="tp-pp-dp")) != default_order
    if lay["pp"] > 1 and lay["schedule"] != "interleaved":
        checks["pipeline stages as planned"] = megatron_stages(ns) == lay["stage_layers"]
    if model.startswith("llama3"):
        checks["rotary base 500000"] = ns["rotary_base"] == 500000 and ns["position_embedding_type"] == "rope"
    if model.startswith("mixtral"):
        checks["all-to-all token dispatcher"] = ns["moe_token_dispatcher_type"] == "alltoall"
        # The plan's etp (default 1: each expert whole, the ep groups folded over tp): Megatron's own
        # default would be etp = tp.
        checks["the plan's expert tensor parallel size"] = ns["expert_tensor_parallel_size"] == lay.get("etp", 1)
    wrong = [k for k, ok in checks.items() if not ok]
    check(f"{name}: the settings mean the planned job", not wrong, (wrong, lay))


# --- torchtitan ------------------------------------------------------------------------------
TITAN = rows("torchtitan-config.tsv")
TITAN_RULES = tomllib.load(open(os.path.join(data, "torchtitan-rules.toml"), "rb"))["rule"]


def titan_fields(version):
    """{(section path, field): (type, default)} of one version."""
    classes = {}
    for r in TITAN:
        if r["version"] == version:
            classes.setdefault(r["class"], {})[r["field"]] = (r["type"], r["default"])
    out = {}
    if version.startswith("toml"):
        def walk(cls, path):
            for f, (t, d) in classes.get(cls, {}).items():
                if t in classes:
                    walk(t, path + [f])
                else:
                    out[(".".join(path), f)] = (t, d)
        walk("JobConfig", [])
    else:  # the flag form: --training.x is TrainingConfig.x, --activation_checkpoint.x ActivationCheckpointConfig.x
        for cls, fields in classes.items():
            section = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.removesuffix("Config")).lower()
            for f, td in fields.items():
                out[(section, f)] = td
    return out


def titan_valid(type_text, value):
    if type_text.startswith("Literal["):
        choices = ast.literal_eval("[" + type_text[len("Literal["):type_text.index("]")] + "]")
        return value in choices
    kinds = {"int": int, "bool": bool, "str": str, "float": (int, float), "list[str]": list}
    options = [t.strip() for t in type_text.split("|")]
    if "None" in options and value is None:
        return True
    return any(isinstance(value, kinds[o]) and not (o == "int" and isinstance(value, bool))
               for o in options if o in kinds)


def check_titan(name, settings, version, world, layers):
    fields = titan_fields(version)
    bad = [f"{s}.{k} = {v!r}" for (s, k), v in settings.items()
           if (s, k) not in fields or not titan_valid(fields[(s, k)][0], v)]
    check(f"{name}: every key is torchtitan {version}'s, with a valid value", not bad, bad)
    sections = {}
    for (s, k), (t, d) in fields.items():
        sections.setdefault(s, {})[k] = python_default(d)
    for (s, k), v in settings.items():
        sections.setdefault(s, {})[k] = v
    ns = {s: SimpleNamespace(**v) for s, v in sections.items() if "." not in s}
    ns.update(world_size=world, layers=layers)
    broken = [f"{r['id']}: {r['says']}" for r in TITAN_RULES
              if version in r["versions"] and eval(r["when"], {}, ns) and not eval(r["require"], {}, ns)]
    check(f"{name}: torchtitan's validation rules hold", not broken, broken)
    return sections


def titan_flags(text):
    _, args, comments = parse_launch(text)
    out = {}
    for flag, words in args:
        section, key = flag[2:].rsplit(".", 1)
        v = words[0]
        out[(section, key)] = True if v == "true" else False if v == "false" else int(v) if re.fullmatch(r"-?\d+", v) else v
    return out, world_of(comments)


def titan_toml(text):
    doc = tomllib.loads(text)
    out = {}

    def walk(t, path):
        for k, v in t.items():
            if isinstance(v, dict):
                walk(v, path + [k])
            else:
                out[(".".join(path), k)] = v
    walk(doc, [])
    return out, world_of([l[2:] for l in text.splitlines() if l.startswith("# ")])


def check_titan_meaning(name, sec, lay, toml_form):
    tr, par = sec["training"], sec["parallelism"]
    local = lay["global_batch_size"] // lay["dp"] if lay["pp"] > 1 else lay["micro_batch_size"]
    seq = tr["seq_len"] if toml_form else tr["max_context_length"]
    checks = {
        "degrees": (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["context_parallel_degree"],
                    par["expert_parallel_degree"], par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"])
        == (lay["tp"], lay["pp"], lay["cp"], lay["ep"], lay["dp"]),
        "sharding (ZeRO-3 = FSDP over dp)": par["data_parallel_shard_degree"] == (lay["dp"] if lay["zero"] == 3 else 1),
        "batch": (tr["local_batch_size"], tr["global_batch_size"]) == (local, lay["global_batch_size"]) if toml_form
        else (tr["num_tokens_per_microbatch_per_dp_rank"], tr["num_tokens_per_train_step"]) == (local * seq, lay["global_batch_size"] * seq),
        "precision": tr["mixed_precision_param"] == ("float32" if lay["precision"] == "fp32" else "bfloat16")
        and tr["mixed_precision_reduce"] == "float32" and tr["dtype"] == "float32",
    }
    if lay["pp"] > 1:
        checks["micro-batches"] = (par["pipeline_parallel_microbatch_size"] == lay["micro_batch_size"]) if toml_form \
            else par["num_pp_microbatches"] == local // lay["micro_batch_size"]
        v = lay["virtual_stages"] if lay["schedule"] == "interleaved" else 1
        lps = par["pipeline_parallel_layers_per_stage"]
        slots = par["pipeline_parallel_first_stage_less_layers"] + par["pipeline_parallel_last_stage_less_layers"]
        checks["stages per rank"] = -(-(LAYERS[name] + slots) // lps) == lay["pp"] * v
    ac = sec["activation_checkpoint"]
    checks["recompute"] = ac["mode"] == lay["recompute"] and (lay["recompute"] != "selective" or ac["selective_ac_option"] == "op")
    if toml_form:
        if lay["precision"] == "fp8":
            checks["float8"] = "quantize.linear.float8" in sec["model"]["converters"]
    wrong = [k for k, ok in checks.items() if not ok]
    check(f"{name}: the settings mean the planned job", not wrong, (wrong, lay, sec))


# --- the plans -------------------------------------------------------------------------------
LAYERS = {}
PLANS = {
    "GPT-3 175B": (["--config", ex("gpt3-175b-4096-a100.toml")], "gpt3", 96),
    "Llama 3 405B cp 16": (["--config", ex("llama3-405b-cp16-h100.toml")], "llama3", 126),
    "Llama 3 405B pp 16 uneven": (["--config", ex("llama3-405b-cp16-h100.toml"), "--schedule", "1f1b",
                                   "--virtual-stages", "1"], "llama3", 126),
    "Mixtral 8x22B ep 8": (["--config", ex("mixtral-8x22b-8-dgx-h100.toml")], "mixtral", 56),
    "Llama 3 8B fp8": (["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "64",
                        "--precision", "fp8"], "llama3", 32),
    "Llama 3 8B ZeRO-1": (["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "64",
                           "--zero", "1"], "llama3", 32),
    "Llama 3 8B ZeRO-3": (["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch-size", "64",
                           "--zero", "3"], "llama3", 32),
}
tmp = tempfile.mkdtemp()
for name, (args, model, layers) in PLANS.items():
    LAYERS[name] = layers
    lay = plan_layout(*args)
    text = run("plan", *args, "--emit", "megatron").stdout
    check(f"{name}: names the Megatron-LM version", "Megatron-LM commit d98e8a64ddf3" in text, text[:300])
    ns = check_megatron(name + " (megatron)", text)
    check_megatron_meaning(name + " (megatron)", ns, lay, model)
    # The sbatch script carries the same arguments, the environment and the nodes.
    script = run("plan", *args, "--emit", "slurm").stdout
    path = os.path.join(tmp, "job.sbatch")
    open(path, "w").write(script)
    syntax = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(f"{name}: the sbatch script passes bash -n", syntax.returncode == 0, syntax.stderr)
    m = re.search(r"^PLAN_ARGS=\(\n(.*?)^\)", script, re.S | re.M)
    script_args = shlex.split(m.group(1)) if m else []
    gpus = re.search(r"--gpus-per-node=(\d+)", script)
    nodes = ns["world_size"] // int(gpus.group(1)) if gpus else -1
    check(f"{name}: sbatch script: nodes, one task per node, GPUs, srun torchrun, the plan's arguments",
          f"#SBATCH --nodes={nodes}\n" in script
          and "#SBATCH --ntasks-per-node=1\n" in script and re.search(r"^srun .*torchrun", script, re.M)
          and "pretrain_gpt.py" in script and script_args == shlex.split(" ".join(
              l.rstrip("\\ ") for l in text.splitlines() if not l.startswith(("#", "export")))),
          script[:1500])
    check(f"{name}: sbatch script exports what Megatron needs",
          ("export CUDA_DEVICE_MAX_CONNECTIONS=1" in script) == (lay["tp"] > 1 or lay["cp"] > 1), script[:800])

# Models read from their config.json: the launch carries their architecture (issue 47), not the
# family's defaults (Qwen3 was written as --rotary-base 10000 --norm-epsilon 1e-05 and kv-channels
# = hidden / heads: a different model).
hf = lambda name: os.path.join(root, "data", "models", "hf", name)
ARCH = {
    "Qwen3-30B-A3B": (["--hf-config", hf("qwen3-30b-a3b.json"), "--seq-len", "4096", "--cluster", "dgx-h100",
                       "--nodes", "4", "--tp", "2", "--pp", "1", "--ep", "8", "--dp", "16", "--sequence-parallel",
                       "--global-batch-size", "256"],
                      {"kv_channels": 128, "qk_layernorm": True, "rotary_base": 1000000, "layernorm_epsilon": 1e-6,
                       "num_experts": 128, "moe_router_topk": 8, "moe_ffn_hidden_size": 768, "ffn_hidden_size": 6144,
                       "num_query_groups": 4, "add_bias_linear": False, "add_qkv_bias": False,
                       "untie_embeddings_and_output_weights": True, "moe_router_pre_softmax": False}),
    "DeepSeek-V3": (["--hf-config", hf("deepseek-v3.json"), "--seq-len", "4096", "--cluster", "dgx-h100",
                     "--nodes", "128", "--tp", "2", "--pp", "8", "--ep", "64", "--dp", "64", "--sequence-parallel", "--schedule", "1f1b",
                     "--global-batch-size", "8192"],
                    {"multi_latent_attention": True, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128,
                     "qk_pos_emb_head_dim": 64, "v_head_dim": 128, "moe_layer_freq": "([0]*3+[1]*58)",
                     "mtp_num_layers": 1, "moe_router_score_function": "sigmoid", "moe_router_enable_expert_bias": True,
                     "moe_router_num_groups": 8, "moe_router_group_topk": 4, "moe_router_topk_scaling_factor": 2.5,
                     "moe_shared_expert_intermediate_size": 2048, "rope_type": "yarn", "rotary_scaling_factor": 40.0,
                     "mscale_all_dim": 1.0, "layernorm_epsilon": 1e-6, "ffn_hidden_size": 18432}),
    "gpt-oss-120b": (["--hf-config", hf("gpt-oss-120b.json"), "--seq-len", "4096", "--cluster", "dgx-h100",
                      "--nodes", "8", "--tp", "1", "--pp", "1", "--ep", "8", "--dp", "64", "--global-batch-size", "512"],
                     {"kv_channels": 64, "add_bias_linear": True, "window_size": "(128,0)", "window_attn_skip_freq": "2",
                      "softmax_type": "learnable", "position_embedding_type": "yarn", "rotary_scaling_factor": 32.0,
                      "activation_func_clamp_value": 7.0, "glu_linear_offset": 1.0, "rotary_base": 150000,
                      "yarn_correction_range_round_to_int": False}),
}
# The MoE dispatcher as a stack setting (--moe-dispatcher, --moe-fp8-dispatch, --moe-ep-overlap):
# written as Megatron-Core names it (flex with its backend, the forward dispatch's dtype, the EP
# overlap with the delayed weight gradients it needs).
ARCH["Qwen3-30B-A3B hybridep, fp8 dispatch, EP overlap"] = (
    ARCH["Qwen3-30B-A3B"][0] + ["--moe-dispatcher", "hybridep", "--moe-fp8-dispatch", "--moe-ep-overlap"],
    {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep", "moe_dispatch_fwd_dtype": "mxfp8",
     "overlap_moe_expert_parallel_comm": True, "delay_wgrad_compute": True})
ARCH["Qwen3-30B-A3B allgather"] = (ARCH["Qwen3-30B-A3B"][0] + ["--moe-dispatcher", "allgather"],
                                   {"moe_token_dispatcher_type": "allgather", "overlap_moe_expert_parallel_comm": False})
# CUDA graphs as a stack setting (--cuda-graphs, --cuda-graph-scope): Megatron-Core's implementation
# and the modules a per-layer graph captures; none named: the whole layer (no modules flag);
# full-iteration: the implementation alone.
ARCH["Qwen3-30B-A3B CUDA graphs attn, moe_router"] = (
    ARCH["Qwen3-30B-A3B"][0] + ["--cuda-graphs", "transformer-engine", "--cuda-graph-scope", "attn,moe_router"],
    {"cuda_graph_impl": "transformer_engine", "cuda_graph_modules": ["attn", "moe_router"]})
ARCH["Qwen3-30B-A3B CUDA graphs local, whole layers"] = (
    ARCH["Qwen3-30B-A3B"][0] + ["--cuda-graphs", "local"], {"cuda_graph_impl": "local", "cuda_graph_modules": []})
ARCH["Qwen3-30B-A3B CUDA graphs full-iteration"] = (
    ARCH["Qwen3-30B-A3B"][0] + ["--cuda-graphs", "full_iteration"],
    {"cuda_graph_impl": "full_iteration", "cuda_graph_modules": []})
ARCH["Qwen3-30B-A3B no CUDA graphs"] = (ARCH["Qwen3-30B-A3B"][0], {"cuda_graph_impl": "none"})
for name, (args, want) in ARCH.items():
    text = run("plan", *args, "--emit", "megatron").stdout
    ns = check_megatron(name + " (megatron)", text)
    wrong = {k: (ns.get(k), v) for k, v in want.items() if ns.get(k) != v}
    check(f"{name} (megatron): the launch carries the model's architecture", not wrong, wrong)
# DeepSeek-V3's 61 layers on pp 8 split 7, 8 x 5, 7, 7: the middle stages are not equal, so
# Megatron's first/last-stage flags cannot say it (Megatron would refuse them); the launch writes
# the split as a layout string, the MTP module on the last stage before the loss.
text = run("plan", *ARCH["DeepSeek-V3"][0], "--emit", "megatron").stdout
ns = check_megatron("DeepSeek-V3 pp 8 (megatron)", text)
chunks = (ns.get("pipeline_model_parallel_layout") or "").split("|")
check("DeepSeek-V3 pp 8 (megatron): a layout string of 8 stages, 61 layers, the MTP module with the loss",
      len(chunks) == 8 and [c.count("t") for c in chunks] == [7, 8, 8, 8, 8, 8, 7, 7]
      and chunks[0].startswith("E") and chunks[-1].endswith("mL") and ns["decoder_first_pipeline_num_layers"] is None,
      chunks)
p = run("plan", *ARCH["Qwen3-30B-A3B"][0], "--stack", "torchtitan", "--emit", "torchtitan-toml", want=2)
check("Qwen3-30B-A3B (torchtitan): refused, naming the architecture no flavor carries",
      "head_dim 128" in p.stderr and "QK-norm" in p.stderr and not p.stdout.strip(), p.stderr)

# NVIDIA's GB200 run of Llama 3.1 405B (Megatron-Bridge 26.06, 256 GB200, MXFP8: pp 16 x v 8 = 128
# chunks on 126 layers, the embedding and the loss each counted as a layer; Trident's fp8 keeps the
# same one-byte copies of the GEMM inputs). Refused before (128 stages but 126 layers); lint names
# the flags without them (an error finding: exit 1, on stdout) and accepts the layout with them; the
# plan's search keeps v 8 with them and the launch carries them.
R405 = ["--hf-config", hf("llama3.1-405b.json"), "--seq-len", "8192", "--cluster", "gb200-nvl72", "--nodes", "64",
        "--tp", "4", "--pp", "16", "--dp", "4", "--schedule", "interleaved", "--virtual-stages", "8",
        "--global-batch-size", "1536", "--micro-batch-size", "1", "--sequence-parallel", "--precision", "fp8"]
UNITS = ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
p = subprocess.run([trident, "lint", *R405], capture_output=True, text=True)
check("405B pp 16 x v 8 without the units: lint's error, naming the flags", p.returncode == 1
      and "error[pp-exceeds-layers]" in p.stdout and "--account-for-embedding-in-pipeline-split" in p.stdout,
      p.stdout[-800:] + p.stderr)
p = subprocess.run([trident, "lint", *R405, *UNITS], capture_output=True, text=True)
check("405B pp 16 x v 8 with the units: lint accepts it", p.returncode == 0 and "pp-exceeds-layers" not in p.stdout,
      p.stdout[-800:] + p.stderr)
text = run("plan", *R405, *UNITS, "--emit", "megatron").stdout
ns = check_megatron("405B pp 16 x v 8 (megatron)", text)
check("405B pp 16 x v 8 (megatron): the split's flags, one layer per virtual stage, Llama 3.1's rope scaling",
      ns["account_for_embedding_in_pipeline_split"] and ns["account_for_loss_in_pipeline_split"]
      and ns["num_layers_per_virtual_pipeline_stage"] == 1 and ns["pipeline_model_parallel_layout"] is None
      and ns["use_rope_scaling"] and ns["rope_scaling_factor"] == 8.0, text[-1500:])
p = subprocess.run([trident, "lint", *R405, *UNITS[:1]], capture_output=True, text=True)
check("405B with the embedding alone: 127 units do not divide over 128 chunks, lint's error", p.returncode == 1
      and "error[pp-exceeds-layers] 126 layers + 1 (embedding / loss) = 127 pipeline units" in p.stdout,
      p.stdout[-800:] + p.stderr)
p = subprocess.run([trident, "plan", *R405, *UNITS[:1], "--emit", "megatron"], capture_output=True, text=True)
check("405B with the embedding alone: the plan finds no layout and writes no launch", p.returncode != 0
      and "--pipeline-model-parallel-size" not in p.stdout, p.stdout[-800:] + p.stderr)

# torchtitan: with the torchtitan stack the plans are ones torchtitan runs.
TITAN_PLANS = ["GPT-3 175B", "Llama 3 405B cp 16", "Mixtral 8x22B ep 8", "Llama 3 8B ZeRO-3", "Llama 3 8B fp8"]
for name in TITAN_PLANS:
    args = PLANS[name][0] + ["--stack", "torchtitan"]
    if name == "GPT-3 175B":
        args += ["--zero", "3"]
    lay = plan_layout(*args)
    check(f"{name}: --stack torchtitan plans ZeRO-3 (torchtitan has no ZeRO-1 or 2)", lay["zero"] == 3, lay)
    for form, version in (("torchtitan-toml", "toml-238fa99"), ("torchtitan", "head-b5bcd76")):
        if (form == "torchtitan" and lay["precision"] == "fp8") or (lay["ep"] > 1 and lay["tp"] > 1):
            p = run("plan", *args, "--emit", form, want=2)
            check(f"{name} ({form}): refused, naming what the flag form lacks", "torchtitan" in p.stderr, p.stderr)
            continue
        text = run("plan", *args, "--emit", form).stdout
        check(f"{name} ({form}): names the torchtitan version", f"torchtitan commit {version.split('-')[1]}" in text, text[:300])
        settings, world = (titan_toml if form.endswith("toml") else titan_flags)(text)
        sec = check_titan(f"{name} ({form})", settings, version, world, PLANS[name][2])
        check_titan_meaning(name, sec, lay, form.endswith("toml"))
    if name == "Llama 3 405B cp 16":
        model = tomllib.loads(run("plan", *args, "--emit", "torchtitan-toml").stdout).get("model", {})
        check("Llama 3 405B (torchtitan-toml): the llama3 405B flavor", model == {"name": "llama3", "flavor": "405B"}, model)

# What a framework cannot express is refused, with the reason and the fix.
refusals = [
    ("torchtitan has no ZeRO-1", PLANS["Llama 3 8B ZeRO-1"][0], "torchtitan-toml", "ZeRO-1"),
    ("torchtitan reduces gradients in fp32 only", PLANS["Llama 3 8B ZeRO-3"][0] + ["--grad-bits", "16"],
     "torchtitan", "mixed_precision_reduce"),
    ("torchtitan has no fp16", PLANS["Llama 3 8B ZeRO-3"][0] + ["--precision", "fp16", "--stack", "torchtitan"],
     "torchtitan-toml", "fp16"),
    ("torchtitan without FSDP trains tp/pp plans in fp32", ["--config", ex("gpt3-175b-4096-a100.toml"), "--zero", "0",
                                                            "--stack", "torchtitan"], "torchtitan", "fp32"),
    ("torchtitan with cp shards over cp", PLANS["Llama 3 405B cp 16"][0] + ["--stack", "torchtitan", "--zero", "0"],
     "torchtitan", "cp ranks"),
    ("Megatron has no dp-tp-pp rank order", ["--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g", "--nodes", "2",
                                             "--tp", "2", "--pp", "2", "--dp", "4", "--order", "dp-tp-pp",
                                             "--global-batch-size", "64"], "megatron", "rank order dp-tp-pp"),
    ("Megatron's selective recompute reruns the fused attention",
     PLANS["Llama 3 8B ZeRO-1"][0] + ["--recompute", "selective", "--no-recompute-flash-attention"], "megatron",
     "reruns the core attention"),
    ("torchtitan's selective checkpointing saves the SDPA output",
     PLANS["Llama 3 8B ZeRO-3"][0] + ["--stack", "torchtitan", "--recompute", "selective",
                                      "--recompute-flash-attention"], "torchtitan-toml", "saves the SDPA output"),
    ("torchtitan's expert mesh is not checked against the plan's expert grid",
     ["--model", "mixtral-8x7b", "--seq-len", "4096", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "2", "--ep", "2",
      "--global-batch-size", "64", "--stack", "torchtitan"], "torchtitan-toml", "not checked against the plan's expert grid"),
    ("torchtitan's async TP needs torch.compile, which the written job leaves off",
     PLANS["Llama 3 8B ZeRO-3"][0] + ["--stack", "torchtitan", "--tp", "2", "--sequence-parallel", "--overlap", "tp,dp"],
     "torchtitan", "async TP"),
    ("torchtitan's FSDP always reduces behind the backward",
     PLANS["Llama 3 8B ZeRO-3"][0] + ["--stack", "torchtitan", "--overlap", "none"], "torchtitan-toml", "DP not overlapped"),
    ("torchtitan does not reduce after the pipeline flush",
     PLANS["Llama 3 8B ZeRO-3"][0] + ["--stack", "torchtitan", "--pp", "2", "--dp-after-pipeline-flush"], "torchtitan",
     "after the pipeline flush"),
    ("Megatron-Core sends whole tensors without sequence parallel",
     ["--model", "gpt3-1.3b", "--cluster", "dgx-a100-80g", "--nodes", "2", "--tp", "2", "--pp", "2", "--dp", "4",
      "--global-batch-size", "64", "--no-sequence-parallel", "--no-pipeline-sends-whole-tensor"], "megatron",
     "sends the whole tensor"),
    ("Megatron's EP overlap needs pp 1 or the interleaved schedule",
     ARCH["DeepSeek-V3"][0] + ["--moe-ep-overlap"], "megatron", "overlap-moe-expert-parallel-comm needs"),
    ("torchtitan has no HybridEP dispatcher",
     ["--model", "mixtral-8x7b", "--seq-len", "4096", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "1", "--ep", "2",
      "--global-batch-size", "64", "--stack", "torchtitan", "--moe-dispatcher", "hybridep"], "torchtitan-toml",
     "not what the plan costs"),
    ("torchtitan captures no CUDA graphs",
     ["--model", "mixtral-8x7b", "--seq-len", "4096", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "1", "--ep", "2",
      "--global-batch-size", "64", "--stack", "torchtitan", "--cuda-graphs", "local"], "torchtitan-toml",
     "torchtitan's training loop captures no CUDA graphs"),
    ("Megatron has no zero-bubble schedule", PLANS["Llama 3 8B ZeRO-1"][0] + ["--pp", "2", "--schedule", "zb-h1"],
     "slurm", "zb-h1"),
]
for what, args, form, needle in refusals:
    p = run("plan", *args, "--emit", form, want=2)
    check(f"refused: {what}", needle in p.stderr and "fix:" in p.stderr.lower() and not p.stdout.strip(),
          p.stdout[-500:] + p.stderr)

# The torchtitan forms of a slurm script: the TOML written next to the job, or the flags.
args = PLANS["Llama 3 8B ZeRO-3"][0] + ["--stack", "torchtitan"]
for form in ("slurm-torchtitan-toml", "slurm-torchtitan"):
    script = run("plan", *args, "--emit", form).stdout
    path = os.path.join(tmp, form + ".sbatch")
    open(path, "w").write(script)
    syntax = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(f"{form}: bash -n, torchrun -m torchtitan.train", syntax.returncode == 0
          and "-m torchtitan.train" in script and "#SBATCH --nodes=2" in script, syntax.stderr + script[:800])

finish()
