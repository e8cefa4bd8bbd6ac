"""Every option `trident train` accepts, under `mpirun -np 2`: honoured (each row names the
effect it must have) or refused with a clear error (exit code 2, the reason and a fix) before
any work. The option list is read from `trident train --help`, so an option added without a row
here fails this test.

usage: train_flags_test.py TRIDENT MPIRUN"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

trident, mpirun = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="trident_flags_")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
failures = []


def path(name):
    return os.path.join(tmp, name)


tok = path("art.tok")
subprocess.run([trident, "data", "prepare", "/usr/share/games/fortunes/art", tok], check=True, capture_output=True)
with open(path("c.toml"), "w") as f:
    f.write("[training]\nweight_decay = 0.07\n")
M, C, R, H = path("m.jsonl"), path("ckpt"), path("r.json"), path("r.html")
EPM = path("ep.jsonl")
MTPM = path("mtp.jsonl")
# A cluster file as `trident bench` writes it ([cluster] peaks, [cost] shares), and a cost file.
with open(path("bench.toml"), "w") as f:
    f.write("[cluster]\nnodes = 1\ngpus-per-node = 2\ngpu-memory-gib = 4\ngpu-fp32-tflops = 0.05\n"
            "gpu-bf16-tflops = 0.05\ngpu-hbm-gbytes-per-s = 20\nintra-link = \"pcie\"\nintra-gbytes-per-s = 5\n"
            "intra-latency-us = 1\ninter-link = \"ethernet\"\ninter-node-gbytes-per-s = 10\ninter-latency-us = 10\n\n"
            "[cost]\ngemm_half_dim = 8\n")
with open(path("cost.toml"), "w") as f:
    f.write("[cost]\nhbm_efficiency = 0.3\ngemm_half_dim = 99\n")


def auto_interval_holds(out):
    m = re.search(r"sqrt\(2 x save ([0-9.]+) s \(measured\) x MTBF ([0-9.e+-]+) s .* = ([0-9.e+-]+) s / step ([0-9.]+) s "
                  r"\(measured\) = every (\d+) steps", out)
    if not m or "(step 2)" not in out:
        return False
    save, mtbf, interval, step, n = float(m[1]), float(m[2]), float(m[3]), float(m[4]), int(m[5])
    saves = [int(x) for x in re.findall(r"checkpoint: .*\(step (\d+)\)", out)]
    # Printed to 3 decimals: the interval and the steps within that rounding; saves at multiples of n, and at the end.
    return (abs(interval - (2 * save * mtbf) ** 0.5) <= 0.01 * interval + 1e-3 and n >= 1
            and abs(n - interval / step) <= 0.5 + interval * 0.0005 / step ** 2 + 0.01 * n
            and saves == sorted(set([2] + [k for k in range(n, 8, n) if k > 2] + [8])))


def metrics():
    return [json.loads(line) for line in open(M)]


# Each row: (option, value or None for a switch, run, check). A check is a regular expression the
# run's output must contain, "!regex" one it must not contain, or a function of the output.
# Runs "A", "B", "C" must succeed; the others must be refused (exit code 2 and "fix:").
rows = [
    ("--help", None, "help", r"Usage: .*train"),
    # A: a two-stage pipeline on 2 ranks with almost every setting given.
    ("--model", "gpt2-small", "A", r"GPT gpt2-small"),
    ("--family", "gpt", "A", r"trident train: GPT "),
    ("--layers", "2", "A", r"model +2 layers"),
    ("--hidden", "32", "A", r"hidden 32,"),
    ("--heads", "2", "A", r"2 heads \(head dim 16\)"),
    ("--kv-heads", "2", "A", r"2 heads \(head dim 16\)"),
    ("--ffn-hidden", "96", "A", r"ffn 96,"),
    ("--seq-len", "16", "A", r"seq 16,"),
    ("--vocab", "320", "A", r"vocab 320"),
    ("--data", tok, "A", r"token file .*art\.tok"),
    ("--global-batch-size", "4", "A", r"global 4 = micro 1 x 4 accumulation"),
    ("--micro-batch-size", "1", "A", r"global 4 = micro 1 x"),
    ("--steps", "6", "A", r"step +1/6 \|"),
    ("--stop-at", "5", "A", lambda out: "done: 5 steps" in out and len(metrics()) == 5),
    ("--lr", "2e-3", "A", r"AdamW lr 2\.00e-03 ->"),
    ("--min-lr", "1e-4", "A", r"-> 1\.00e-04"),
    ("--warmup", "2", "A", r"warm-up 2,"),
    ("--weight-decay", "0.05", "A", r"wd 0\.05"),
    ("--grad-clip", "0.5", "A", r"clip 0\.50"),
    ("--seed", "3", "A", r"seed +3 "),
    ("--metrics", M, "A", lambda out: metrics()[0]["step"] == 1 and "time_shares" in metrics()[0]),
    ("--eval-every", "3", "A", lambda out: "val_loss" in metrics()[2] and "val_loss" not in metrics()[1]),
    ("--eval-batches", "2", "A", r"validation +every 3 steps and at the end, 2 micro-batches"),
    ("--checkpoint", C, "A", lambda out: json.load(open(os.path.join(C, "manifest.json")))["meta"]["step"] == 5),
    ("--checkpoint-every", "2", "A", r"checkpoint: .*\(step 2\)(.|\n)*checkpoint: .*\(step 4\)"),
    # AUTO: --checkpoint-every auto saves after step 2, timed, then every round(sqrt(2 x save x MTBF) / step)
    # steps, the MTBF of --failures-per-1000-gpu-days on 2 ranks (the printed inputs give the printed interval).
    ("--checkpoint-every", "auto", "AUTO", lambda out: auto_interval_holds(out)),
    ("--failures-per-1000-gpu-days", "1e10", "AUTO", r"MTBF 0\.00432 s \(1 / \(1e\+10 failures per 1000 GPU-days x 2 ranks\)\)"),
    ("--failures-per-1000-gpu-days", "5", "rate-unused", r"sets the interval of --checkpoint-every auto, which is not given"),
    ("--checkpoint-every", "auto", "auto-no-checkpoint", r"--checkpoint-every auto .*saves into --checkpoint, which is not given"),
    ("--threads", "1", "A", r"cpu \(1 OpenMP threads"),
    ("--device", "cpu", "A", r"device +cpu"),
    ("--log-every", "4", "A", lambda out: re.search(r"step +4/6 \|", out) and not re.search(r"step +2/6 \|", out)),
    ("--schedule", "gpipe", "A", r"schedule gpipe,"),
    ("--virtual-stages", "1", "A", r"virtual stages 1,"),
    ("--precision", "fp32", "A", r"ZeRO 0, fp32"),
    ("--no-sequence-parallel", None, "A", r"!sequence parallel"),
    ("--tp", "1", "A", r"tp 1 x pp 2 x dp 1"),
    ("--pp", "2", "A", r"tp 1 x pp 2 x dp 1"),
    ("--dp", "1", "A", r"tp 1 x pp 2 x dp 1"),
    ("--order", "tp-dp-pp", "A", r"order tp-dp-pp"),
    ("--stage-layers", "1,1", "A", r"layers per stage 1,1,"),
    ("--trace-comm", None, "A", r"\[comm\] step 0 rank [01] pp\[[01]/2\]"),
    ("--report", R, "A", lambda out: len(json.load(open(R))["losses"]) == 5),
    ("--html", H, "A", lambda out: 'id="rehearsal"' in open(H).read()),
    ("--comm-timeout", "60", "A", r"timeout 60 s per operation"),
    ("--bucket-mib", "1", "A", r"DP gradient bucket 1 MiB"),
    ("--prediction-cluster", path("none.toml"), "A", r"no cluster file '.*none\.toml'"),
    # P: the prediction's cost table: --cost FILE, under the cluster file's [cost] keys (as plan reads them).
    ("--cost", path("cost.toml"), "P",
     r"cost table \(built-in \+ .*cost\.toml \+ \[cost\] keys of .*bench\.toml\): .*gemm_half_dim 8,.*hbm_efficiency 0\.3,"),
    ("--cost", path("missing.toml"), "cost-missing", r"cannot read cost table '.*missing\.toml'"),
    # B: resume A's pipeline checkpoint on another layout (dp 2, ZeRO-1): it continues at step 6.
    ("--resume", C, "B", r"resume +from .*ckpt at step 5(.|\n)*step +6/6 \|"),
    ("--zero", "1", "B", r"tp 1 x pp 1 x dp 2(.|\n)*ZeRO 1,"),
    # I: a new run from A's weights on another layout: step 0, its own schedule.
    ("--init-from", C, "I", r"init from +.*ckpt: its weights \(step 5 of its run\)(.|\n)*step +1/2 \|"),
    # Z3: ZeRO-3 on dp 2 (weights gathered unit by unit): trains, the report lists the gathers.
    ("--zero", "3", "Z3", r"tp 1 x pp 1 x dp 2(.|\n)*ZeRO 3,(.|\n)*of it ZeRO gathers +[0-9.]+%"),
    # C: tensor parallel with sequence parallel, a setting from a config file, no tracing.
    ("--sequence-parallel", None, "C", r"ZeRO 0, fp32, sequence parallel"),
    ("--config", path("c.toml"), "C", r"wd 0\.07"),
    ("--recompute", "full", "C", r"recompute full(.|\n)*activations recompute full; per stage(.|\n)*stage 0: 1 slots"),
    ("--no-trace-comm", None, "C", r"!\[comm\]"),
    # Selective recompute under flash attention: the runtime's unfused attention reruns its forward
    # under selective recompute either way, so both settings train (on CUDA with flash, off is refused).
    ("--recompute-flash-attention", None, "A", r"!train-selective-flash"),
    ("--no-recompute-flash-attention", None, "B", r"!train-selective-flash"),
    # Per-chunk DP overlap: the runtime's grad-ready hook reduces each bucket once its gradients
    # are done, each model chunk's as its last backward ends: accepted, nothing refused.
    ("--dp-overlap-per-chunk", None, "A", r"!dp-overlap-per-chunk"),
    ("--no-dp-overlap-per-chunk", None, "B", r"!dp-overlap-per-chunk"),
    # Whole-tensor pipeline sends: a planner setting of the p2p volume; the runtime sends each rank's
    # output activation as it holds it (no scatter-gather), so neither value changes what trains; the
    # run's prediction takes the runtime's sends (rehearse_unit_test).
    ("--pipeline-sends-whole-tensor", None, "A", r"!pipeline-sends-whole-tensor"),
    ("--no-pipeline-sends-whole-tensor", None, "B", r"!pipeline-sends-whole-tensor"),
    # FP8 cast fusion: a setting of FP8 recipes only (train refuses fp8 itself), nothing to do at bf16/fp32.
    # SwiGLU fusion: the runtime's kernel is fused (the Llama run L takes the default); eager
    # storage is another stack's, refused for a Llama model.
    ("--fused-swiglu", None, "L", r"trident train: Llama"),
    ("--no-fused-swiglu", None, "swiglu", r"--no-fused-swiglu: the runtime's SwiGLU kernel is fused"),
    # Reducing after the pipeline flush (DeepSpeed's pipeline engine): the runtime's hook reduces
    # each bucket behind the last backward, so on a pipeline it is refused; off is its own way.
    ("--dp-after-pipeline-flush", None, "capability", r"--dp-after-pipeline-flush: the runtime reduces each gradient bucket"),
    ("--no-dp-after-pipeline-flush", None, "A", r"!dp-after-pipeline-flush"),
    ("--fp8-fused-casts", None, "A", r"!fp8-fused-casts"),
    ("--no-moe-fp8-dispatch", None, "A", r"!moe-fp8-dispatch"),
    ("--no-moe-ep-overlap", None, "B", r"!moe-ep-overlap"),
    ("--no-fp8-fused-casts", None, "B", r"!fp8-fused-casts"),
    # The stack's compute efficiency: a planner setting of another stack's kernel rates (what a
    # plan's written config carries); the runtime runs its own kernels: accepted, nothing refused.
    ("--stack-compute-efficiency", "0.767", "A", r"!stack-compute-efficiency"),
    ("--no-fp8-params", None, "B", r"!fp8-params"),  # the runtime's own setting: no FP8 weights
    # Refused: settings of layers a dense model does not have.
    ("--experts-per-token", "2", "moe-knobs", r"--experts-per-token .*applies to mixture-of-experts"),
    ("--expert-ffn-hidden", "64", "moe-knobs", r"--expert-ffn-hidden .*applies to mixture-of-experts"),
    ("--shared-experts", "1", "moe-knobs", r"--shared-experts .*applies to mixture-of-experts"),
    ("--moe-dense-layers", "1", "moe-knobs", r"--moe-dense-layers .*applies to mixture-of-experts"),
    ("--moe-layer-freq", "2", "moe-knobs", r"--moe-layer-freq .*applies to mixture-of-experts"),
    ("--capacity-factor", "1.5", "moe-knobs", r"--capacity-factor .*applies to mixture-of-experts"),
    ("--moe-load-imbalance", "1.2", "moe-knobs", r"--moe-load-imbalance .*applies to mixture-of-experts"),
    ("--moe-drop", None, "moe-knobs", r"--moe-drop applies to mixture-of-experts layers, but .* is dense"),
    ("--moe-normalise", None, "moe-knobs", r"--moe-normalise applies to mixture-of-experts layers"),
    ("--moe-router-score-function", "sigmoid", "moe-knobs", r"--moe-router-score-function .*applies to mixture-of-experts"),
    ("--moe-router-enable-expert-bias", None, "moe-knobs", r"--moe-router-enable-expert-bias .*applies to mixture-of-experts"),
    ("--moe-router-topk-scaling-factor", "2.5", "moe-knobs", r"--moe-router-topk-scaling-factor .*applies to mixture-of-experts"),
    ("--moe-router-bias-update-rate", "0.002", "moe-knobs", r"--moe-router-bias-update-rate applies to mixture-of-experts layers"),
    ("--moe-router-num-groups", "2", "moe-knobs", r"--moe-router-num-groups .*applies to mixture-of-experts"),
    ("--moe-router-group-topk", "1", "moe-knobs", r"--moe-router-group-topk .*applies to mixture-of-experts"),
    # Group-limited routing: top groups that do not divide the top-k refused (Megatron's rule).
    ("--moe-router-num-groups", "2", "groups-bad", r"group-limited routing with 2 groups, top 3 groups, of 4 experts, top-2"),
    ("--moe-router-group-topk", "3", "groups-bad", r"router-groups"),
    # The bias's rate on a router without the bias would change nothing: refused by name.
    ("--moe-router-bias-update-rate", "0.002", "moe-bias", r"moves the router's expert bias, which .* does not have(.|\n)*--moe-router-enable-expert-bias"),
    # M: a mixture-of-experts model (4 experts, top-2) trains; the start-up table counts its parameters.
    # ... and its step FLOPs count the MLP a token uses (top-k experts and the router), formula printed.
    ("--experts", "4", "M", r"experts +2 MoE layers \(the first 0 dense\).*top-2, no dropping(.|\n)*"
     r"step FLOPs +3 B \(L \(2 s \(h \(h \+ 2 kv\) \+ h\^2 \+ a\).*a = \d+ active MLP params per layer: MoE layers "
     r"\(top-2 \+ 0 shared\)(.|\n)*step +2/2"),
    ("--moe-z-loss-coeff", "0.001", "M", r"z-loss x 0\.001"),
    ("--moe-aux-loss-coeff", "0.02", "M", r"router +softmax scores, chosen scores as weights, load-balancing loss x 0\.02"),
    ("--no-moe-normalise", None, "M", r"chosen scores as weights"),
    ("--no-moe-drop", None, "M", r"top-2, no dropping"),
    # MF: every second layer a MoE layer (Megatron's --moe-layer-freq 2): 1 of the 2 layers.
    # DeepSeek-V3's router: sigmoid scores, the top-k on score + expert bias, scaled weights.
    ("--moe-router-score-function", "sigmoid", "MF", r"router +sigmoid scores, top-k on score \+ expert bias"),
    ("--moe-router-enable-expert-bias", None, "MF", r"top-k on score \+ expert bias \(moved 0\.002 a step towards the mean load\)"),
    ("--moe-router-bias-update-rate", "0.002", "MF", r"moved 0\.002 a step"),
    ("--no-moe-router-enable-expert-bias", None, "M", r"!expert bias"),
    ("--moe-router-topk-scaling-factor", "2.5", "MF", r"chosen weights over their sum, weights x 2\.5"),
    ("--moe-router-num-groups", "2", "MF", r"group-limited: the experts in 2 groups, each token's top-k in its best 1 \(by each group's top 2 scores summed\)"),
    ("--moe-router-group-topk", "1", "MF", r"in its best 1 "),
    ("--moe-layer-freq", "2", "MF", r"experts +1 MoE layers \(the first 0 dense, then one layer in 2 a MoE layer\)(.|\n)*step +2/2"),
    # Refused: what the runtime cannot execute (the capability check), all reported together.
    # A MoE model drops tokens under cp 2 as one process does (the cp ranks share the routing).
    ("--experts", "2", "capability", r"!train-moe(?![\w-])"),
    ("--kv-heads", "1", "capability", r"grouped-query attention"),
    ("--precision", "bf16", "capability", r"bf16 mixed precision runs on the CUDA backend only"),
    ("--grad-bits", "16", "capability", r"--grad-bits 16: the runtime keeps fp32 gradients"),
    ("--optimizer-state-bits", "16", "capability", r"--optimizer-state-bits 16: the runtime's Adam keeps fp32 moments"),
    ("--cp-kind", "allgather", "capability", r"--cp-kind allgather: the runtime passes KV blocks round a ring"),
    ("--moe-dispatcher", "deepep", "capability", r"--moe-dispatcher deepep.*the runtime dispatches by a 16-bit all-to-all"),
    ("--moe-fp8-dispatch", None, "capability", r"--moe-fp8-dispatch.*: the runtime dispatches"),
    ("--moe-ep-overlap", None, "capability", r"--moe-ep-overlap.*: the runtime dispatches"),
    # CUDA graphs: a setting of the Python stacks' host issue (plan/host_issue.h); the runtime
    # issues from C++ and captures none: refused by name with or without a stack, and a scope
    # without per-layer graphs is refused as such.
    ("--cuda-graphs", "local", "capability", r"--cuda-graphs local without a --stack: CUDA graphs remove"),
    ("--cuda-graph-scope", "attn", "parse", r"--cuda-graph-scope attn with --cuda-graphs none"),
    # Megatron-Core's --recompute-modules: the runtime's selective recompute reruns the core
    # attention alone; other modules are refused by name (core_attn alone is the runtime's own).
    ("--recompute-modules", "layernorm,mlp", "recompute-modules",
     r"--recompute-modules layernorm,mlp: the runtime's selective recompute reruns the core attention alone"),
    ("--schedule", "zb-h1", "Z", r"schedule zb-h1,(.|\n)*of which W passes +[0-9.]+%"),
    ("--recompute", "full", "zb-full", r"zb-h1 postpones each weight-gradient pass"),
    ("--cp", "2", "capability", r"!ring-attention kernels"),  # accepted on the CPU: no cp refusal
    # EP: expert parallel on 2 ranks (dp 2, 4 experts split 2 and 2): the all-to-alls are their own
    # row; the metrics file has each layer's routing, 4 sequences x 16 tokens x top-2 = 128 assignments.
    ("--ep", "2", "EP", lambda out: re.search(r"tp 1 x pp 1 x dp 2(.|\n)*EP all-to-all +[0-9.]+%", out)
     and all(sum(layer["tokens_per_expert"]) == 128 for line in open(EPM) for layer in json.loads(line)["moe_routing"])),
    # The planner's load imbalance: the rehearsal report's prediction takes it instead of the one
    # the steps measured (each step's in the metrics file).
    ("--moe-load-imbalance", "1.3", "EP", lambda out: re.search(
        r"EP load imbalance: the most loaded EP rank received [0-9.]+\.\.[0-9.]+ x the mean rows over the steps; "
        r"the prediction takes 1\.300 \(--moe-load-imbalance\)", out)
     and all(json.loads(line)["ep_load_imbalance"] >= 1 for line in open(EPM))),
    # ETP: etp = tp splits each routed expert over the tp ranks (Megatron-Core's expert layers); experts
    # folded over tp without expert parallelism (etp 1 < tp, ep 1) are refused, naming --ep / --etp.
    ("--etp", "2", "ETP", r"tp 2 x pp 1 x dp 1, etp 2 "),
    ("--etp", "1", "etp-fold", r"expert layout tp 2, etp 1, ep 1(.|\n)*--etp 2 \(= --tp\)(.|\n)*train-expert-layout"),
    # CP: context parallel on 2 ranks (each sequence in 4 chunks, ring attention).
    ("--cp", "2", "CP", r"tp 1 x pp 1 x dp 1 x cp 2(.|\n)*CP ring exchange"),
    # L: a Llama preset shrunk by flags (grouped-query attention, kv heads split over tp 2).
    ("--model", "llama3-8b", "L", r"trident train: Llama llama3-8b"),
    ("--family", "llama", "L", r"trident train: Llama "),
    ("--kv-heads", "2", "L", r"4 heads \(head dim 32\), 2 kv heads"),
    ("--tied-embeddings", None, "llama-tied", r"the runtime's Llama has an untied head"),
    ("--device", "cuda", "device", r"--device cuda"),
    ("--gpu-comm", "mpi-host", "gpu-comm", r"--gpu-comm is for GPU ranks, but --device is cpu"),
    ("--virtual-stages", "2", "parse", r"--virtual-stages 2 needs the interleaved schedule"),
    ("--zero", "-1", "parse", r"--zero -1 is not a ZeRO stage"),
    ("--fp8-params", None, "parse", r"--fp8-params with --precision \w+: FP8 weights need FP8 matrix products"),
    ("--sequence-parallel", None, "sp", r"sequence parallel splits sequences across the tensor-parallel group, but tp is 1"),
    # The software stack: the runtime is the default one; others are refused, saying which setting.
    ("--tied-embeddings", None, "A", r"GPT gpt2-small"),
    ("--attention", "flash", "capability", r"flash attention is not in the CPU kernels"),
    ("--overlap", "tp,dp", "capability", r"--overlap tp,dp: the runtime's overlap is its own: the DP gradient reduction in buckets, pipeline sends asynchronous"),
    ("--no-tied-embeddings", None, "capability", r"an untied output layer"),
    ("--stack", "megatron-core-te", "stack", r"flash attention \(set by --stack megatron-core-te\)"),
    # The model description's architecture fields: the runtime trains plain GPT and Llama layers with
    # Qwen3's attention in the Llama layer (a head width of its own, QK-norm) and either family's norm
    # epsilon; any other departure, and these two in a GPT model, is refused by name (train-architecture).
    # The RoPE base is a Llama setting it honours.
    ("--head-dim", "32", "capability", r"head_dim 32 \(hidden / heads = 16\)"),
    ("--qk-norm", None, "capability", r"QK-norm"),
    ("--head-dim", "32", "L", r"4 heads \(head dim 32\), 2 kv heads, QK-norm, norm epsilon 1e-06"),
    ("--qk-norm", None, "L", r"QK-norm"),
    ("--norm-epsilon", "1e-6", "L", r"norm epsilon 1e-06"),
    ("--no-qk-norm", None, "A", r"!QK-norm"),
    # GPT-OSS's attention in the Llama layer (a window of 16 keys on a 64-token sequence, sinks),
    # refused in a GPT model.
    ("--window-size", "16", "L", r"sliding window 16 \(full attention every 2 layers\), attention sinks"),
    ("--window-attn-skip-freq", "2", "L", r"full attention every 2 layers"),
    ("--attention-sinks", None, "L", r"attention sinks"),
    ("--no-attention-sinks", None, "A", r"!attention sinks"),
    ("--window-size", "8", "capability", r"sliding-window attention \(8 tokens\)"),
    # GPT-OSS's biases and clamped unit in the Llama layer (Megatron's flags): trained in run L (the
    # checkpoint meta keeps them: resumed_run), refused in a GPT model (its GELU MLP has no gate).
    ("--add-bias-linear", None, "L", r"q/k/v biases, linear biases"),
    ("--activation-func-clamp-value", "7", "L", r"gated unit clamped at 7"),
    ("--add-qkv-bias", None, "A", r"GPT gpt2-small"),
    ("--no-add-bias-linear", None, "MLA", r"!linear biases"),
    ("--activation-func-clamp-value", "7", "capability", r"gated unit clamped at 7"),
    ("--no-add-qkv-bias", None, "capability", r"no Q/K/V biases"),
    ("--attention-sinks", None, "capability", r"attention sinks"),
    # DeepSeek-V3's multi-head latent attention in the Llama layer (Megatron's flags), refused in a
    # GPT model, its sizes refused without it.
    ("--multi-latent-attention", None, "MLA", r"MLA \(q_lora 16, kv_lora 16, heads 16 \+ 8 rope, values 16\)"),
    ("--q-lora-rank", "16", "MLA", r"MLA \(q_lora 16"),
    ("--kv-lora-rank", "16", "MLA", r"kv_lora 16,"),
    ("--qk-head-dim", "16", "MLA", r"heads 16 \+"),
    ("--qk-pos-emb-head-dim", "8", "MLA", r"\+ 8 rope"),
    ("--v-head-dim", "16", "MLA", r"values 16\)"),
    ("--no-multi-latent-attention", None, "A", r"!MLA"),
    # YaRN (Megatron's names) on that MLA model: the ramp, the attention factor (mscale 0.5 over
    # mscale-all-dim 1 at factor 40) and MLA's softmax multiplier; its settings without
    # --rope-type yarn refused by name, and yarn in a GPT model refused (train-architecture).
    ("--rope-type", "yarn", "MLA", r"RoPE theta 10000, yarn scaling x 40 \("),
    ("--rotary-scaling-factor", "40", "MLA", r"yarn scaling x 40 \(original context 16,"),
    ("--yarn-original-max-position-embeddings", "16", "MLA", r"original context 16, beta 16 / 2"),
    ("--yarn-beta-fast", "16", "MLA", r"beta 16 / 2 unrounded"),
    ("--yarn-beta-slow", "2", "MLA", r"beta 16 / 2 unrounded"),
    ("--no-yarn-correction-range-round-to-int", None, "MLA", r"beta 16 / 2 unrounded, attention factor"),
    ("--mscale", "0.5", "MLA", r"attention factor 0\.86526,"),
    ("--mscale-all-dim", "1", "MLA", r"attention factor 0\.86526, softmax scale x 1\.87385\)"),
    ("--yarn-correction-range-round-to-int", None, "yarn-flags",
     r"--yarn-correction-range-round-to-int \(from --yarn-correction-range-round-to-int\) sets YaRN's rope scaling, "
     r"which the model does not have"),
    ("--rope-type", "yarn", "yarn-gpt", r"the runtime trains plain GPT and Llama layers; .*rope scaling 'yarn'"),
    ("--multi-latent-attention", None, "mla-gpt", r"the runtime trains plain GPT and Llama layers; .*multi-head latent attention"),
    ("--qk-head-dim", "16", "mla-flags", r"--qk-head-dim \(from --qk-head-dim\) sizes multi-head latent attention"),
    # Megatron's embedding / loss pipeline units (plan, lint, the launch): the runtime runs no chunk
    # without a layer, so train refuses them; their --no- forms are the default.
    ("--account-for-embedding-in-pipeline-split", None, "capability", r"--account-for-embedding-in-pipeline-split (--account-for-loss-in-pipeline-split )?\(Megatron's pipeline units\): the runtime splits the layers alone"),
    ("--account-for-loss-in-pipeline-split", None, "capability", r"--account-for-loss-in-pipeline-split \(Megatron's pipeline units\): the runtime splits the layers alone"),
    # Megatron-Core's pipeline layout (plan, lint, the launch): the runtime splits the layers evenly.
    ("--pipeline-layout", "t|t", "capability", r"--pipeline-layout 't\|t': the runtime splits the layers evenly"),
    ("--no-account-for-embedding-in-pipeline-split", None, "L", r"!pipeline-split"),
    ("--no-account-for-loss-in-pipeline-split", None, "L", r"!pipeline-split"),
    ("--rope-theta", "500000", "L", r"RoPE theta 500000"),
    # Llama 3.1's rope scaling: trained in the Llama layer, a rope setting of a GPT model refused
    # (train-architecture), its refinements without the factor refused by name.
    ("--rope-scaling-factor", "8", "L", r"RoPE theta 500000, llama3 scaling x 8 \(frequency factors 2 / 5, original context 32\)"),
    ("--rope-low-freq-factor", "2", "L", r"frequency factors 2 / 5"),
    ("--rope-high-freq-factor", "5", "L", r"frequency factors 2 / 5"),
    ("--rope-original-max-position", "32", "L", r"original context 32\)"),
    ("--rope-scaling-factor", "8", "capability", r"rope scaling 'llama3'"),
    ("--rope-high-freq-factor", "4", "parse", r"--rope-high-freq-factor \(from --rope-high-freq-factor\) refines Llama 3\.1's rope scaling"),
    # --elastic: this process supervises and starts the ranks: under mpirun it is a rank, refused
    # with its other problems; its options without it are refused (tests/parallel/elastic_kill_test.py runs it).
    ("--elastic", None, "elastic-rank", r"--elastic starts the ranks itself, but this process is a rank"),
    ("--ranks-per-node", "3", "elastic-rank", r"--ranks-per-node 3 does not divide the 2 ranks"),
    ("--launcher", " ", "elastic-rank", r"--launcher is empty"),
    ("--launcher", "srun", "elastic-only", r"--launcher \(from --launcher\) applies to --elastic, which is not given"),
    ("--no-elastic", None, "elastic-only", r"applies to --elastic, which is not given"),
    ("--evict-stragglers", None, "elastic-only", r"--evict-stragglers \(from --evict-stragglers\) applies to --elastic"),
    ("--no-evict-stragglers", None, "elastic-only", r"applies to --elastic, which is not given"),
    # DeepSeek-V3's multi-token prediction on the last of 2 pipeline stages (a Llama model): its
    # loss logged and in the metrics apart from the main loss; refused in a GPT model, with zb-h1,
    # and its weight without it.
    ("--mtp-num-layers", "1", "MTP", lambda out: re.search(
        r"mtp +1 multi-token-prediction layer on the last stage(.|\n)*step +2/2 \| loss [0-9.]+ \| mtp_1 loss [0-9.]+", out)
     and all("mtp_1_loss" in json.loads(line) for line in open(MTPM))),
    ("--mtp-loss-scaling-factor", "0.2", "MTP", r"loss weighted 0\.2 / 1"),
    ("--mtp-num-layers", "1", "capability", r"1 multi-token-prediction layer"),
    ("--mtp-num-layers", "1", "zb-full", r"zb-h1's split backward with multi-token prediction"),
    ("--mtp-loss-scaling-factor", "0.2", "mtp-unused", r"weighs the multi-token-prediction losses, which .* does not have(.|\n)*--mtp-num-layers"),
    ("--straggler-factor", "2.5", "P", r"above 2\.5 x the median rank's"),
    ("--hf-config", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "models", "hf",
                                 "gpt-oss-120b.json"), "hf", r"the runtime trains plain GPT and Llama layers; .*rope scaling 'yarn'"),
]

# Arguments a refused run needs besides its rows (a small model that would otherwise train).
small = ["--data", tok, "--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "16",
         "--global-batch-size", "4", "--micro-batch-size", "1", "--steps", "2", "--threads", "1", "--pp", "2"]
extra = {
    "B": ["--data", tok, "--steps", "6", "--micro-batch-size", "1", "--global-batch-size", "4", "--threads", "1",
          "--eval-batches", "1", "--pp", "1", "--dp", "2"],
    "C": small[:-2] + ["--tp", "2", "--eval-batches", "1"],
    "I": ["--data", tok, "--steps", "2", "--micro-batch-size", "1", "--global-batch-size", "4", "--threads", "1",
          "--eval-batches", "1", "--pp", "1", "--dp", "2"],
    "L": ["--data", tok, "--layers", "2", "--hidden", "256", "--heads", "4", "--ffn-hidden", "512", "--vocab", "512",
          "--seq-len", "64", "--global-batch-size", "2", "--micro-batch-size", "1", "--steps", "2", "--threads", "1",
          "--eval-batches", "1", "--tp", "2"],
    "llama-tied": small + ["--family", "llama"],
    "MLA": ["--data", tok, "--family", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "32",
            "--global-batch-size", "2", "--micro-batch-size", "1", "--steps", "2", "--threads", "1",
            "--eval-batches", "1", "--tp", "2"],
    "hf": ["--data", tok, "--steps", "2", "--threads", "1", "--seq-len", "16", "--global-batch-size", "4",
           "--micro-batch-size", "1"],
    "swiglu": small + ["--family", "llama"],
    "P": small + ["--prediction-cluster", path("bench.toml")],
    "Z": small + ["--eval-batches", "1"],
    "zb-full": small + ["--schedule", "zb-h1"],
    "recompute-modules": small + ["--recompute", "selective"],
    "CP": small[:-2] + ["--eval-batches", "1"],
    "Z3": small[:-2] + ["--dp", "2", "--eval-batches", "1"],
    "M": small + ["--eval-batches", "1"],
    "MF": small + ["--experts", "4", "--eval-batches", "1"],
    "moe-bias": small + ["--experts", "4"],
    "groups-bad": small + ["--experts", "4"],
    "MTP": small + ["--family", "llama", "--eval-batches", "1", "--metrics", MTPM],
    "AUTO": [a if a != "2" or small[i - 1] != "--steps" else "8" for i, a in enumerate(small[:-2])]
            + ["--dp", "2", "--eval-batches", "1", "--checkpoint", path("auto.ckpt")],
    "ETP": small[:-2] + ["--tp", "2", "--experts", "4", "--eval-batches", "1"],
    "etp-fold": small[:-2] + ["--tp", "2", "--experts", "4"],
    "EP": small[:-2] + ["--dp", "2", "--experts", "4", "--eval-batches", "1", "--metrics", EPM,
                        "--prediction-cluster", path("bench.toml")],
}
must_succeed = {"help", "A", "B", "I", "C", "L", "MLA", "P", "Z", "CP", "Z3", "M", "MF", "EP", "ETP", "AUTO", "MTP"}
order = ["help", "A", "B", "I", "C", "L", "MLA", "yarn-flags", "yarn-gpt", "mla-flags", "mla-gpt", "P", "Z", "CP", "Z3", "M", "MF", "EP", "ETP", "MTP", "mtp-unused", "groups-bad", "etp-fold", "AUTO", "rate-unused", "auto-no-checkpoint", "cost-missing", "moe-knobs", "moe-bias", "capability", "llama-tied", "swiglu", "zb-full",
         "recompute-modules", "device", "gpu-comm", "parse", "sp", "stack", "elastic-rank", "elastic-only"]

# Every option of `trident train --help` has a row.
help_text = subprocess.run([trident, "train", "--help"], capture_output=True, text=True).stdout
options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))
missing = sorted(options - {r[0] for r in rows})
if missing:
    failures.append(f"options without a row in this table: {', '.join(missing)}")

for run in order:
    argv = []
    for flag, value, r, _ in rows:
        if r == run:
            argv += [flag] + ([value] if value is not None else [])
    argv += extra.get(run, small if run not in must_succeed else [])
    cmd = [trident, "train"] + argv if run == "help" else [mpirun, "--allow-run-as-root", "--oversubscribe",
                                                           "--bind-to", "none", "-np", "2", trident, "train"] + argv
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    out = p.stdout + p.stderr
    want_ok = run in must_succeed
    if want_ok and p.returncode != 0:
        failures.append(f"run {run} failed (exit {p.returncode}):\n{out[-3000:]}")
        continue
    if not want_ok and (p.returncode != 2 or "fix:" not in out):
        failures.append(f"run {run} was not refused with exit 2 and a fix (exit {p.returncode}):\n{out[-3000:]}")
        continue
    for flag, value, r, check in rows:
        if r != run:
            continue
        if callable(check):
            try:
                ok = bool(check(out))
            except Exception as e:  # a missing or malformed file
                ok = False
                out += f"\n({type(e).__name__}: {e})"
        elif check.startswith("!"):
            ok = re.search(check[1:], out) is None
        else:
            ok = re.search(check, out) is not None
        print(f"{'ok  ' if ok else 'FAIL'} {run:10} {flag} {value if value is not None else ''}")
        if not ok:
            failures.append(f"{flag} {value} (run {run}) has no effect / message: {check}\n{out[-2500:]}")

honoured = sum(1 for r in rows if r[2] in must_succeed)
print(f"{len(options)} options in `trident train --help`, {len(rows)} rows: {honoured} honoured, "
      f"{len(rows) - honoured} refused")
shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("PASS")
