// The capability table (see capability_table.h): each row's cells side by side, so a setting's
// train refusal, rehearsal substitution and framework refusals are read and changed together.
#include "capability/capability_table.h"

#include <fmt/format.h>

#include "capability/capability.h"
#include "core/mesh.h"

namespace trident::capability {

namespace {

std::string n(int64_t v) { return std::to_string(v); }

// " (set by --stack NAME)" after a value a stack preset may have set.
std::string from_stack(const RunSpec& r) { return r.exec.stack.empty() ? "" : " (set by --stack " + r.exec.stack + ")"; }

bool modules_beyond_core_attn(const ExecutionSpec& x) {
  return x.recompute == Recompute::Selective && x.recompute_modules.any() &&
         !(x.recompute_modules == RecomputeModules{.core_attn = true});
}

bool moe_dispatch_not_runtimes(const RecipeSettings& r) {
  return r.moe_dispatcher != MoeDispatcher::AllToAll || r.moe_fp8_dispatch || r.moe_ep_overlap;
}

// Without ep the runtime reduces the experts' gradients over the dense dp x cp group, which is
// the expert grid's EDP group only when etp = tp and the etp groups are attention's tp groups
// (the two grids give tp and etp the same stride: tp first in --order, Megatron's default).
// With ep > 1 it builds EP, EDP and ETP from the Mesh whatever the grid. A constant-time test on
// the Mesh's own strides; a layout check_run refuses is left to it (true).
bool experts_without_ep_reduce_over_dense_ranks(const Layout& L) {
  if (L.ep > 1) return true;
  if (L.etp != L.tp) return false;
  if (L.tp <= 1) return true;
  try {
    const Mesh mesh(L, 1);
    return mesh.stride(Dim::TP) == mesh.group_stride(Dim::ETP);
  } catch (const InputError&) {
    return true;  // said by check_run
  }
}

const std::vector<CapabilityRow> kRows = {
    {"--precision",
     [](const RunSpec& r, const std::string& device, Problems& p) {
       const Precision pr = r.exec.precision;
       if (pr == Precision::FP16)
         p.add("fp16 training (loss scaling) is not implemented by the runtime",
               "use --precision fp32 (or bf16 on --device cuda)", "train-precision");
       if (pr == Precision::BF16 && !device_computes(device, Precision::BF16))
         p.add("bf16 mixed precision runs on the CUDA backend only; the " + device + " kernels compute in fp32",
               "use --precision fp32 on --device " + device + ", or --device cuda", "train-precision");
       if (quantized_gemms(pr))
         p.add(to_string(pr) + " training (quantised matrix products with scaling) is not implemented by the runtime",
               "use --precision fp32 (or bf16 on --device cuda) for train", "train-precision");
     },
     [](RunSpec& r) -> std::string {
       if (r.exec.precision == Precision::FP32) return "";
       const std::string line = "precision " + to_string(r.exec.precision) + " -> fp32 (the CPU kernels compute in fp32)";
       r.exec.precision = Precision::FP32;
       return line;
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       const ExecutionSpec& e = r.exec;
       if (e.precision == Precision::FP16)
         p.add("precision fp16: torchtitan's mixed_precision_param takes bfloat16 or float32 only",
               "replan with --precision bf16", "torchtitan-precision");
       if (e.precision == Precision::MXFP8 || e.precision == Precision::NVFP4)
         p.add("precision " + to_string(e.precision) + ": the torchtitan versions Trident writes quantise linears "
                   "to float8 with one scale per tensor or row only (the [quantize.linear.float8] converter); they "
                   "have no " + to_string(e.precision) + " block scaling",
               "replan with --precision fp8 (or bf16), or emit --emit megatron", "torchtitan-" + to_string(e.precision));
     },
     [](RunSpec& r) { r.exec.precision = Precision::FP16; }},
    {"--attention",
     [](const RunSpec& r, const std::string& device, Problems& p) {
       if (r.exec.attention == AttentionKind::Flash && device != "cuda")
         p.add("flash attention" + from_stack(r) + " is not in the CPU kernels: they compute attention unfused",
               "use --attention unfused for train on --device cpu", "train-attention");
     },
     [](RunSpec& r) -> std::string {
       if (r.exec.attention == AttentionKind::Unfused) return "";
       const std::string line = "attention " + to_string(r.exec.attention) + " -> unfused (the CPU kernels' attention)";
       r.exec.attention = AttentionKind::Unfused;
       return line;
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       if (r.exec.attention == AttentionKind::Unfused)
         p.add("unfused attention: torchtitan runs PyTorch SDPA (flash / cuDNN kernels that never store the scores)",
               "replan with --attention flash (or --stack torchtitan)", "torchtitan-attention");
     },
     [](RunSpec& r) { r.exec.attention = AttentionKind::Flash; }},
    {"--overlap",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (!(r.exec.overlap == Overlap{}))
         p.add("--overlap " + to_string(r.exec.overlap) + from_stack(r) +
                   ": the runtime's overlap is its own: the DP gradient reduction in buckets, pipeline sends "
                   "asynchronous, TP collectives blocking",
               "use --overlap dp (the default) for train", "train-overlap");
     },
     [](RunSpec& r) -> std::string {
       const Overlap in_effect = overlap_in_effect(r.exec.overlap, r.exec.schedule);
       if (in_effect == Overlap{}) return "";
       r.exec.overlap = Overlap{};
       return "overlap " + to_string(in_effect) + " -> " + to_string(Overlap{}) +
              " (TP collectives block on CPU ranks; pipeline sends stay asynchronous there)";
     },
     [](const RunSpec& r, Problems& p) {
       const ExecutionSpec& e = r.exec;
       const Layout& l = r.layout;
       if (dp_overlapped(e, l.pp) && e.schedule == ScheduleKind::Interleaved && l.pp > 1 && !e.recipe.dp_overlap_per_chunk)
         p.add("DP overlap behind one micro-batch in the interleaved schedule: Megatron's overlap_grad_reduce "
               "reduces and gathers each model chunk on its own",
               "replan with --dp-overlap-per-chunk (or --stack megatron-core-te)", "megatron-dp-per-chunk");
       if (e.overlap.tp && l.tp > 1 && !e.sequence_parallel)
         p.add("TP overlap without sequence parallel: Megatron overlaps TP communication with the GEMMs "
               "(--tp-comm-overlap) only with --sequence-parallel",
               "replan with --sequence-parallel, or --overlap dp,pp", "megatron-tp-overlap");
       if (l.pp > 1 && e.schedule != ScheduleKind::Interleaved && pp_overlapped(e.overlap, e.schedule))
         p.add("PP overlap with the " + to_string(e.schedule) +
                   " schedule: Megatron overlaps pipeline sends in the interleaved schedule only",
               "replan with --overlap tp,dp (or --schedule interleaved)", "megatron-pp-overlap");
     },
     // The overlap the prediction assumed must be the one the written job runs: torchtitan's FSDP
     // and DDP always reduce behind the backward, and its async TP needs torch.compile (left off).
     [](const RunSpec& r, bool, Problems& p) {
       const ExecutionSpec& e = r.exec;
       const Layout& l = r.layout;
       if (!dp_overlapped(e, l.pp) && l.dp * l.cp > 1)
         p.add(std::string(e.overlap.dp ? "gradients reduced after the pipeline flush" : "DP not overlapped") +
                   ": torchtitan's FSDP and DDP reduce each unit's gradients in the (last micro-batch's) backward",
               "replan with --overlap dp and --no-dp-after-pipeline-flush (or --stack torchtitan)",
               "torchtitan-dp-overlap");
       if (e.overlap.tp && l.tp > 1)
         p.add("TP overlap: torchtitan overlaps TP collectives only with async TP, which needs torch.compile, and the "
               "written job keeps compile off (eager ops, as its memory assumes)",
               "replan with --overlap dp (or --stack torchtitan)", "torchtitan-tp-overlap");
     },
     [](RunSpec& r) { r.exec.overlap.tp = true, r.layout.tp = 2, r.layout.dp = 2; }},
    {"--grad-bits",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.exec.grad_bits != 32)
         p.add("--grad-bits " + n(r.exec.grad_bits) + ": the runtime keeps fp32 gradients", "use --grad-bits 32 for train",
               "train-grad-bits");
     },
     [](RunSpec& r) -> std::string {
       if (r.exec.grad_bits == 32) return "";
       const std::string line = "gradients " + n(r.exec.grad_bits) + "-bit -> 32-bit";
       r.exec.grad_bits = 32;
       return line;
     },
     [](const RunSpec& r, Problems& p) {
       if (r.exec.precision == Precision::FP16 && r.exec.grad_bits != 32)
         p.add("16-bit gradient reduction with fp16: Megatron reduces gradients in fp32 or bf16 only",
               "replan with --grad-bits 32 (or --precision bf16)", "megatron-grad-dtype");
     },
     [](const RunSpec& r, bool, Problems& p) {
       if (r.exec.precision != Precision::FP32 && r.exec.grad_bits == 16)
         p.add("16-bit gradient reduction: torchtitan's mixed_precision_reduce takes float32 only",
               "replan with --grad-bits 32 (or --stack torchtitan)", "torchtitan-grad-dtype");
     },
     [](RunSpec& r) { r.exec.precision = Precision::BF16, r.exec.grad_bits = 16; }},
    {"--fp8-params, --optimizer-state-bits",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.exec.recipe.fp8_params)
         p.add("--fp8-params: the runtime keeps no FP8 weights", "drop --fp8-params for train", "train-precision");
       if (r.exec.recipe.optimizer_state_bits != 32)
         p.add("--optimizer-state-bits " + n(r.exec.recipe.optimizer_state_bits) + ": the runtime's Adam keeps fp32 moments",
               "use --optimizer-state-bits 32 for train", "train-optimizer-state");
     },
     [](RunSpec& r) -> std::string {
       RecipeSettings& x = r.exec.recipe;
       if (!x.fp8_params && x.optimizer_state_bits == 32) return "";
       x.fp8_params = false;
       x.optimizer_state_bits = 32;
       return "optimizer states and weights -> fp32 (the CPU runtime's Adam)";
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       if (r.exec.recipe.optimizer_state_bits != 32)
         p.add("16-bit optimizer states: torchtitan's AdamW keeps its states in the parameters' fp32",
               "replan with --optimizer-state-bits 32 (or --stack torchtitan)", "torchtitan-optimizer-state");
     },
     [](RunSpec& r) { r.exec.recipe.optimizer_state_bits = 16; }},
    {"--dp-after-pipeline-flush",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.exec.recipe.dp_after_pipeline_flush && r.layout.pp > 1)
         p.add("--dp-after-pipeline-flush" + from_stack(r) +
                   ": the runtime reduces each gradient bucket as soon as the last micro-batch's backward has "
                   "written it (its grad-ready hook), not after the pipeline flush",
               "use --no-dp-after-pipeline-flush for train", "train-dp-after-flush");
     },
     [](RunSpec& r) -> std::string {
       if (!r.exec.recipe.dp_after_pipeline_flush || r.layout.pp <= 1) return "";
       r.exec.recipe.dp_after_pipeline_flush = false;
       return "gradient reduction after the pipeline flush -> behind the last backward (the runtime's grad-ready hook)";
     },
     nullptr, nullptr,  // torchtitan's refusal is the overlap row's (DP not behind the backward)
     [](RunSpec& r) { r.exec.recipe.dp_after_pipeline_flush = true, r.layout.pp = 2; }},
    {"--moe-dispatcher, --moe-fp8-dispatch, --moe-ep-overlap",
     [](const RunSpec& r, const std::string&, Problems& p) {
       const RecipeSettings& x = r.exec.recipe;
       if (moe_dispatch_not_runtimes(x))
         p.add("--moe-dispatcher " + to_string(x.moe_dispatcher) + (x.moe_fp8_dispatch ? " --moe-fp8-dispatch" : "") +
                   (x.moe_ep_overlap ? " --moe-ep-overlap" : "") + from_stack(r) +
                   ": the runtime dispatches by a 16-bit all-to-all of every routed copy, not overlapped",
               "use --moe-dispatcher alltoall without --moe-fp8-dispatch / --moe-ep-overlap for train",
               "train-moe-dispatcher");
     },
     [](RunSpec& r) -> std::string {
       RecipeSettings& x = r.exec.recipe;
       if (r.layout.ep <= 1 || !moe_dispatch_not_runtimes(x)) return "";
       const std::string line = "MoE dispatcher " + to_string(x.moe_dispatcher) +
                                (x.moe_fp8_dispatch ? ", FP8 dispatch" : "") + (x.moe_ep_overlap ? ", overlapped" : "") +
                                " -> 16-bit all-to-all, not overlapped (the runtime's)";
       x.moe_dispatcher = MoeDispatcher::AllToAll;
       x.moe_fp8_dispatch = x.moe_ep_overlap = false;
       return line;
     },
     nullptr,
     // torchtitan's expert_parallel_comm_backend: "standard" (all-to-all) or "deepep"; no all-gather
     // or HybridEP dispatcher, no FP8 dispatch, no overlap with the other micro-batch.
     [](const RunSpec& r, bool, Problems& p) {
       const RecipeSettings& x = r.exec.recipe;
       if (r.layout.ep > 1 && moe_dispatch_not_runtimes(x))
         p.add("--moe-dispatcher " + to_string(x.moe_dispatcher) + (x.moe_fp8_dispatch ? " with --moe-fp8-dispatch" : "") +
                   (x.moe_ep_overlap ? " with --moe-ep-overlap" : "") +
                   ": the written job would run torchtitan's all-to-all (its deepep backend is not emitted), "
                   "not what the plan costs",
               "replan with --moe-dispatcher alltoall and without --moe-fp8-dispatch / --moe-ep-overlap",
               "torchtitan-moe-dispatcher");
     },
     [](RunSpec& r) { r.layout.ep = 2, r.exec.recipe.moe_dispatcher = MoeDispatcher::DeepEP; }},
    {"--recompute-modules",
     // The runtime's selective recompute reruns the attention (core_attn) and nothing else.
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (modules_beyond_core_attn(r.exec))
         p.add("--recompute-modules " + to_string(r.exec.recompute_modules) + from_stack(r) +
                   ": the runtime's selective recompute reruns the core attention alone (core_attn)",
               "use --recompute-modules core_attn (or none named), --recompute full or none, for train",
               "train-recompute-modules");
     },
     [](RunSpec& r) -> std::string {
       if (!modules_beyond_core_attn(r.exec)) return "";
       const std::string line = "recompute modules " + to_string(r.exec.recompute_modules) +
                                " -> the core attention (the runtime's selective recompute)";
       r.exec.recompute_modules = {};
       return line;
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       if (modules_beyond_core_attn(r.exec))
         p.add("--recompute-modules " + to_string(r.exec.recompute_modules) + ": torchtitan's selective activation "
               "checkpointing saves by op or by layer, it has no per-module checkpoints",
               "replan with --recompute selective without --recompute-modules, or --recompute full",
               "torchtitan-recompute-modules");
     },
     [](RunSpec& r) { r.exec.recompute = Recompute::Selective, r.exec.recompute_modules = {.moe_act = true}; }},
    {"--recompute-flash-attention",
     // The runtime's selective recompute reruns the attention forward whichever its kernels.
     [](const RunSpec& r, const std::string& device, Problems& p) {
       const ExecutionSpec& x = r.exec;
       if (x.recompute == Recompute::Selective && x.attention == AttentionKind::Flash && !x.recompute_flash_attention &&
           device == "cuda")
         p.add("selective recompute that keeps the fused attention's output" + from_stack(r) +
                   ": the runtime's selective recompute reruns the attention forward",
               "use --recompute-flash-attention, or --recompute none, for train", "train-selective-flash");
     },
     nullptr,
     // Megatron's selective recompute checkpoints the core attention (its default
     // --recompute-modules core_attn), fused or not: it cannot keep a fused attention's output.
     [](const RunSpec& r, Problems& p) {
       const ExecutionSpec& e = r.exec;
       const bool core_attn = !e.recompute_modules.any() || e.recompute_modules.core_attn;
       if (e.recompute == Recompute::Selective && core_attn && e.attention == AttentionKind::Flash &&
           !e.recompute_flash_attention)
         p.add("selective recompute that keeps the fused attention's output: Megatron's selective recompute "
               "reruns the core attention (flash included)",
               "replan with --recompute-flash-attention (what Megatron runs), or --recompute none (the same "
               "prediction)",
               "megatron-selective-flash");
     },
     [](const RunSpec& r, bool, Problems& p) {
       const ExecutionSpec& e = r.exec;
       if (e.recompute == Recompute::Selective && e.attention == AttentionKind::Flash && e.recompute_flash_attention)
         p.add("selective recompute of the fused attention: torchtitan's selective activation checkpointing saves "
               "the SDPA output (its op save list) and reruns no attention",
               "replan with --no-recompute-flash-attention (or --stack torchtitan)", "torchtitan-selective-flash");
     },
     [](RunSpec& r) {
       r.exec.recompute = Recompute::Selective, r.exec.attention = AttentionKind::Flash;
       r.exec.recompute_flash_attention = false;
     }},
    {"--cuda-graphs, --cuda-graph-scope",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.exec.recipe.cuda_graphs != CudaGraphs::None)
         p.add("--cuda-graphs " + to_string(r.exec.recipe.cuda_graphs) + from_stack(r) +
                   ": the runtime issues its kernels from C++ one by one and captures no CUDA graphs",
               "use --cuda-graphs none for train", "train-cuda-graphs");
     },
     [](RunSpec& r) -> std::string {
       RecipeSettings& x = r.exec.recipe;
       if (x.cuda_graphs == CudaGraphs::None) return "";
       const std::string line = "CUDA graphs " + to_string(x.cuda_graphs) + " -> none (the runtime issues its kernels one by one)";
       x.cuda_graphs = CudaGraphs::None;
       x.cuda_graph_scopes = {};
       return line;
     },
     nullptr,
     // torchtitan captures no CUDA graphs in training (eager ops, compile off in the written job).
     [](const RunSpec& r, bool, Problems& p) {
       if (r.exec.recipe.cuda_graphs != CudaGraphs::None)
         p.add("--cuda-graphs " + to_string(r.exec.recipe.cuda_graphs) +
                   ": torchtitan's training loop captures no CUDA graphs, so the written job would issue every kernel "
                   "from the host, not what the plan costs",
               "replan with --cuda-graphs none", "torchtitan-cuda-graphs");
     },
     [](RunSpec& r) { r.exec.recipe.cuda_graphs = CudaGraphs::TransformerEngine; }},
    {"--cp-kind",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.layout.cp > 1 && r.exec.recipe.cp_kind != CpKind::Ring)
         p.add("--cp-kind " + to_string(r.exec.recipe.cp_kind) + from_stack(r) + ": the runtime passes KV blocks round a ring",
               "use --cp-kind ring for train", "train-cp-kind");
     },
     [](RunSpec& r) -> std::string {
       if (r.exec.recipe.cp_kind == CpKind::Ring || r.layout.cp <= 1) return "";
       const std::string line = "cp " + to_string(r.exec.recipe.cp_kind) + " -> ring (the runtime's ring attention)";
       r.exec.recipe.cp_kind = CpKind::Ring;
       return line;
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       if (r.layout.cp > 1 && r.exec.recipe.cp_kind != CpKind::AllGather)
         p.add("context parallel as a ring: torchtitan's context parallel all-gathers K and V (its default rotate "
               "method, which the written config keeps)",
               "replan with --cp-kind allgather (or --stack torchtitan)", "torchtitan-cp-kind");
     },
     [](RunSpec& r) { r.layout.cp = 2, r.exec.recipe.cp_kind = CpKind::AllGather; }},
    {"--fused-swiglu",
     [](const RunSpec& r, const std::string&, Problems& p) {
       if (r.model.family == ModelFamily::Llama && !r.exec.recipe.fused_swiglu)
         p.add("--no-fused-swiglu" + from_stack(r) +
                   ": the runtime's SwiGLU kernel is fused (it keeps the gate and up output and the product, not "
                   "silu(gate))",
               "use --fused-swiglu (the default) for train", "train-swiglu");
     },
     nullptr, nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       if (r.model.family == ModelFamily::Llama && r.exec.recipe.fused_swiglu)
         p.add("fused SwiGLU: torchtitan's FeedForward runs silu and the product as eager ops (no torch.compile in "
               "the written job), which keep w1's and w3's outputs and silu(w1 x) besides the product",
               "replan with --no-fused-swiglu (or --stack torchtitan)", "torchtitan-swiglu");
     },
     [](RunSpec& r) { r.model.family = ModelFamily::Llama, r.exec.recipe.fused_swiglu = false; }},
    // The runtime sends each TP rank's boundary activation as it holds it: its own s/tp rows under
    // sequence parallel, the whole tensor without (no scatter/gather), as Megatron-Core does.
    {"--pipeline-sends-whole-tensor",
     nullptr,
     [](RunSpec& r) -> std::string {
       if (!pipeline_sends_scattered(r.exec, r.layout.tp, r.layout.pp)) return "";
       r.exec.recipe.pipeline_sends_whole_tensor = true;
       return "pipeline sends 1/tp shares gathered by the receiver -> the whole tensor from every TP rank (the "
              "runtime sends the activation each rank holds)";
     },
     [](const RunSpec& r, Problems& p) {
       if (pipeline_sends_scattered(r.exec, r.layout.tp, r.layout.pp))
         p.add("pipeline sends of 1/tp shares gathered by the receiver without sequence parallel: Megatron-Core "
               "sends the whole tensor from every TP rank (its pipeline has no scatter/gather)",
               "replan with --sequence-parallel, or --pipeline-sends-whole-tensor", "megatron-pp-shares");
     },
     nullptr,
     [](RunSpec& r) {
       r.layout.tp = 2, r.layout.pp = 2, r.exec.sequence_parallel = false;
       r.exec.recipe.pipeline_sends_whole_tensor = false;
     }},
    // The runtime lays experts out on the plan's expert grid except without ep, where it needs
    // etp = tp: such a plan is rehearsed at etp = tp.
    {"--etp, --ep (expert layout)",
     [](const RunSpec& r, const std::string&, Problems& p) {
       const Layout& L = r.layout;
       if (r.model.is_moe() && !experts_without_ep_reduce_over_dense_ranks(L))
         p.add("expert layout tp " + n(L.tp) + ", etp " + n(L.etp) + ", ep 1 in --order " + L.order +
                   ": without expert parallelism the runtime reduces the experts' gradients over the dense dp x cp "
                   "ranks, which are the expert grid's EDP group only at etp = tp with tp and etp on the same ranks",
               "use --ep 2 or more (the runtime builds EP, EDP and ETP from the expert grid then), or --etp " +
                   n(L.tp) + " (= --tp) with tp first in --order",
               "train-expert-layout");
     },
     [](RunSpec& r) -> std::string {
       Layout& L = r.layout;
       if (!r.model.is_moe() || L.ep != 1 || L.etp == L.tp || L.tp <= 0) return "";
       const std::string line = "expert layout etp " + n(L.etp) + " -> " + n(L.tp) +
                                " (= tp: without ep the runtime reduces the experts' gradients over the dense dp x cp "
                                "ranks, the EDP group at etp = tp)";
       L.etp = L.tp;
       return line;
     },
     nullptr,
     [](const RunSpec& r, bool, Problems& p) {
       const Layout& l = r.layout;
       if (l.ep > 1 && l.tp > 1)
         p.add("expert parallel with tp > 1: torchtitan forms its expert groups on its own device mesh, not "
               "checked against the plan's expert grid (etp " + n(l.etp) + " x ep " + n(l.ep) + " over tp x cp x dp)",
               "replan with --tp 1 (or --ep 1)", "torchtitan-expert-tp");
     },
     [](RunSpec& r) { r.model.experts = 4, r.model.experts_per_token = 2, r.layout.tp = 2, r.layout.etp = 1, r.layout.ep = 1; }},
};

}  // namespace

const std::vector<CapabilityRow>& capability_rows() { return kRows; }

void refuse_for_train(const RunSpec& run, const std::string& device, Problems& problems) {
  for (const CapabilityRow& row : kRows)
    if (row.train) row.train(run, device, problems);
}

std::vector<std::string> substitute_for_rehearsal(RunSpec& run) {
  std::vector<std::string> lines;
  for (const CapabilityRow& row : kRows)
    if (row.rehearse)
      if (std::string line = row.rehearse(run); !line.empty()) lines.push_back(std::move(line));
  return lines;
}

void refuse_for_megatron(const RunSpec& run, Problems& problems) {
  for (const CapabilityRow& row : kRows)
    if (row.megatron) row.megatron(run, problems);
}

void refuse_for_torchtitan(const RunSpec& run, bool toml, Problems& problems) {
  for (const CapabilityRow& row : kRows)
    if (row.torchtitan) row.torchtitan(run, toml, problems);
}

}  // namespace trident::capability
