// ExecutionSpec: how a step runs, apart from the layout sizes: batch, schedule, memory
// savers and number formats. Kept apart from the model and the system, as Calculon does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/pipeline_layout.h"
#include "core/problems.h"

namespace trident {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1 };
enum class Recompute { None, Selective, Full };
// Training recipe. bf16/fp16: 16-bit weights and activations with fp32 master weights and
// Adam moments; gradients in fp32 (Megatron's main grads) unless grad_bits says 16.
// fp8: Transformer Engine style, FP8 matrix products in the transformer layers, bf16 everywhere
// else (attention, norms, logits), fp32 master weights and Adam moments; one scale per tensor
// (delayed or current scaling). mxfp8 and nvfp4 are the same recipe with block-scaled formats
// (Blackwell's tensor cores scale the blocks in hardware): mxfp8 E4M3 with one E8M0 scale per 32
// elements; nvfp4 E2M1 (half a byte) with one E4M3 scale per 16 elements and one fp32 per tensor.
enum class Precision { BF16, FP16, FP32, FP8, MXFP8, NVFP4 };
// unfused: attention as two batched GEMMs with the s x s scores stored (softmax, dropout) for
// backward. flash: fused kernels that never store the scores (FlashAttention, cuDNN fused).
enum class AttentionKind { Unfused, Flash };
// Context parallel attention: ring (KV blocks passed round the cp group, each behind a block's
// attention: Megatron-Core's p2p) or allgather (K and V all-gathered inside the cp group before the
// attention, their gradients reduce-scattered after it, as Meta ran Llama 3: exposed, small with GQA).
enum class CpKind { Ring, AllGather };
// How a MoE layer moves its tokens to the expert ranks and back (Megatron-Core's
// --moe-token-dispatcher-type, and --moe-flex-dispatcher-backend for flex): an all-to-all of every
// routed copy; an all-gather of the tokens over the ep group and a reduce-scatter back; or flex
// (DeepEP, HybridEP), which sends one copy of a token per destination NVLink domain over the
// network and fans it out over NVLink there.
enum class MoeDispatcher { AllToAll, AllGather, DeepEP, HybridEP };
// CUDA graphs (Megatron-Core's --cuda-graph-impl): none; captured per layer by Megatron-Core's own
// graph runner (local) or Transformer Engine's make_graphed_callables (transformer-engine), over
// the scopes of cuda_graph_scopes; or the whole forward-backward step as one graph
// (full-iteration). A graph is issued by one launch instead of one per kernel.
enum class CudaGraphs { None, Local, TransformerEngine, FullIteration };
// The parts of a layer a per-layer graph captures (Megatron-Core's --cuda-graph-modules, formerly
// --cuda-graph-scope): the attention block, the dense MLP block, a MoE layer's whole MoE block,
// its router (with the norm before it), the dispatcher's preprocessing (the permute).
struct CudaGraphScopes {
  bool attn = false, mlp = false, moe = false, moe_router = false, moe_preprocess = false;
  bool any() const { return attn || mlp || moe || moe_router || moe_preprocess; }
  bool operator==(const CudaGraphScopes&) const = default;
};
// Megatron-Core's fine-grained selective recompute (--recompute-granularity selective
// --recompute-modules, Megatron's names): each named module's forward output is dropped after the
// forward (its inputs stay) and rerun before its backward. None named: Megatron's default, the core
// attention alone (core_attn). Modelled (plan/recompute_modules.h): core_attn, mla_up_proj (MLA's
// query and key/value up projections with the rope: Q, K, V dropped), moe_act (the routed
// experts' activation: the FC2 input dropped), layernorm (the input and pre-MLP norms: their
// outputs dropped), mlp (a dense layer's MLP: its internals dropped). moe and shared_experts are
// read (Megatron's names) and refused by the planner as not modelled.
struct RecomputeModules {
  bool core_attn = false, mla_up_proj = false, moe_act = false, layernorm = false, mlp = false, moe = false,
       shared_experts = false;
  bool any() const { return core_attn || mla_up_proj || moe_act || layernorm || mlp || moe || shared_experts; }
  bool operator==(const RecomputeModules&) const = default;
};

// Recipe settings the layout search keeps as given (it varies layout, batch split, schedule,
// ZeRO stage and recompute; these come from the flags or the stack preset).
struct RecipeSettings {
  // FP8 primary weights (Transformer Engine fp8_model_params, NeMo fp8_params): the weights kept
  // as FP8 (1 byte, no 16-bit copy) and all-gathered in FP8 by the distributed optimizer. Needs fp8.
  bool fp8_params = false;
  // Adam moments and master weights: 32-bit, or 16-bit (Megatron-Core's precision-aware optimizer).
  int optimizer_state_bits = 32;
  CpKind cp_kind = CpKind::Ring;
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;
  // The forward dispatch sends FP8 rows (MXFP8: 1 byte + one 1-byte scale per 32), the combine
  // and the backward's all-to-alls stay 16-bit (Megatron-Core's --moe-dispatch-fwd-dtype mxfp8).
  bool moe_fp8_dispatch = false;
  // Dispatch and combine of one micro-batch run behind the other micro-batch's compute (Megatron-
  // Core's --overlap-moe-expert-parallel-comm with --delay-wgrad-compute: forward and backward of
  // adjacent micro-batches merged). Needs the alltoall or flex dispatcher, pp 1 or the
  // interleaved schedule, and no full recomputation (plan::ep_overlap_applies).
  bool moe_ep_overlap = false;
  // CUDA graphs and what a per-layer graph captures (empty with local / transformer-engine: the
  // whole layer, Megatron-Core's default). Graphed kernels cost the host one launch per graph
  // (plan/host_issue.h); full-iteration leaves the step no host floor.
  CudaGraphs cuda_graphs = CudaGraphs::None;
  CudaGraphScopes cuda_graph_scopes;
  // Interleaved schedule: each model chunk's gradient reduction starts when its last backward ends
  // and its weight all-gather before its first forward (Megatron's overlap_grad_reduce /
  // overlap_param_gather per chunk); off, the stage's whole reduction hides behind one micro-batch.
  bool dp_overlap_per_chunk = false;
  // Each TP rank sends the boundary activation as it holds it: without sequence parallel the
  // whole b x s x h from every TP rank, under it its own s/tp rows (Megatron-Core, DeepSpeed's
  // pipeline engine, torchtitan, Trident's runtime: every stack preset but megatron-lm-2021).
  // Off, the default of a run or calibration row that names no stack: Megatron-LM's
  // scatter/gather (up to 2022): without sequence parallel each TP rank sends 1/tp of the tensor
  // and the receiver all-gathers the shares on the TP link (under it, the same s/tp rows).
  bool pipeline_sends_whole_tensor = false;
  // With pp > 1 the gradient reduction waits for the pipeline flush instead of running behind the
  // last micro-batch's backward (DeepSpeed's pipeline engine: its ReduceGrads instruction follows
  // the last backward, and ZeRO 1-2's overlap_comm hooks stay off under it). No effect at pp 1.
  bool dp_after_pipeline_flush = false;
  // FP8: the casts of the QKV and FC1 inputs fused into the norms before them and the FC2 input's
  // into the activation (Transformer Engine's LayerNormLinear / LayerNormMLP write FP8 outputs);
  // off, each of the four GEMM inputs is cast by a kernel of its own.
  bool fp8_fused_casts = false;
  // A SwiGLU MLP's activation in one kernel that keeps only its input (the gate and up
  // projections' output) for the backward, which recomputes silu: 6 s b f bytes with the product
  // (FC2's input). Megatron-Core's bias_swiglu_fusion, Transformer Engine's LayerNormMLP and
  // Trident's own kernel do this; eager PyTorch (silu, then a product: DeepSpeed-Megatron's and
  // torchtitan's MLPs) also keeps silu(gate), 8 s b f.
  bool fused_swiglu = true;
  // The share of the cost table's compute rate the stack's kernels reach (1 = Megatron-LM's, on
  // which the tables are measured). Below 1 where a stack runs the same layout measurably slower:
  // every compute term (GEMMs, attention, element-wise work, recompute) is divided by it.
  double compute_efficiency = 1.0;
  bool operator==(const RecipeSettings&) const = default;
};

// Communications the software stack hides behind compute. Hidden time still slows the compute
// it overlaps (CostTable::overlap_slowdown); what the compute cannot cover stays exposed.
struct Overlap {
  bool tp = false;  // TP collectives pipelined with the GEMMs next to them (userbuffers, async TP)
  bool dp = true;   // gradient reduction in buckets during backward, weight all-gather during forward
  bool pp = false;  // pipeline sends and receives asynchronous, behind the next micro-batch's compute
  // Megatron overlaps pipeline sends in its interleaved schedule only (validate_args turns
  // overlap_p2p_comm off otherwise): a stack preset that says so gets blocking sends in 1F1B.
  bool pp_interleaved_only = false;
  bool operator==(const Overlap&) const = default;
};
// Whether pipeline sends run behind compute under schedule `s`.
bool pp_overlapped(const Overlap& o, ScheduleKind s);
// The overlap the prediction assumes under schedule `s`: pp off where the stack's sends block in
// it. What reports print and what a written config or flag list gives back (which then means
// the same under that schedule whatever the stack).
Overlap overlap_in_effect(const Overlap& o, ScheduleKind s);
// The one text of the overlap in reports: overlap_in_effect's list, and why pp is not in it when
// the stack overlaps pipeline sends in another schedule ("tp,dp (pipeline sends block in 1f1b: ...)").
std::string overlap_text(const Overlap& o, ScheduleKind s);
std::string to_string(const Overlap& o);  // "tp,dp", "none", "tp,dp,pp"
// "tp,dp,pp" (any subset, comma or '+' separated), "none" or "all".
bool parse_overlap(const std::string& text, Overlap& out);

std::string to_string(ScheduleKind s);  // "gpipe", "1f1b", "interleaved", "zb-h1"
std::string to_string(Recompute r);     // "none", "selective", "full"
std::string to_string(Precision p);     // "bf16", "fp16", "fp32", "fp8", "mxfp8", "nvfp4"
// The matrix products of the layers run quantised (fp8, mxfp8, nvfp4), the rest in bf16.
bool quantized_gemms(Precision p);
// Bytes of one element of a quantised GEMM operand, its block scales included: fp8 1, mxfp8
// 1 + 1/32 (one E8M0 byte per 32), nvfp4 1/2 + 1/16 (one E4M3 byte per 16; the per-tensor fp32
// scale is negligible). 0 where the GEMMs are not quantised.
double quantized_element_bytes(Precision p);
// Copies Transformer Engine makes of a quantised GEMM operand (a weight, an input, an output
// gradient) for the forward and the backward GEMMs: 1 with one scale per tensor (the transposed
// use reads the same bytes), 2 with block scales (the blocks run along a row, so the transpose is
// quantised on its own: rowwise and columnwise data, each with its scales).
int quantized_copies(Precision p);
std::string to_string(AttentionKind a);     // "unfused", "flash"
bool parse_attention(const std::string& text, AttentionKind& out);
std::vector<std::string> attention_names();
std::string to_string(CpKind k);  // "ring", "allgather"
bool parse_cp_kind(const std::string& text, CpKind& out);
std::vector<std::string> cp_kind_names();
std::string to_string(MoeDispatcher d);  // "alltoall", "allgather", "deepep", "hybridep"
bool parse_moe_dispatcher(const std::string& text, MoeDispatcher& out);  // also "flex" = deepep (Megatron's default backend)
std::vector<std::string> moe_dispatcher_names();
std::string to_string(CudaGraphs g);  // "none", "local", "transformer-engine", "full-iteration"
// Also Megatron-Core's spellings transformer_engine and full_iteration.
bool parse_cuda_graphs(const std::string& text, CudaGraphs& out);
std::vector<std::string> cuda_graphs_names();
// "attn,moe_router" in Megatron-Core's names, "" when none.
std::string to_string(const CudaGraphScopes& s);
// A comma or space separated list of attn, mlp, moe, moe_router, moe_preprocess ("" or "full":
// none, the whole layer); false with the unknown names in `unknown`.
bool parse_cuda_graph_scopes(const std::string& text, CudaGraphScopes& out, std::vector<std::string>& unknown);
std::vector<std::string> cuda_graph_scope_names();
// "mla_up_proj,moe_act" in Megatron-Core's names, "" when none named.
std::string to_string(const RecomputeModules& r);
// A comma or space separated list (Megatron's ['a', 'b'] spelling too) of core_attn, mla_up_proj,
// moe_act, layernorm, mlp, moe, shared_experts; false with the unknown names in `unknown`.
bool parse_recompute_modules(const std::string& text, RecomputeModules& out, std::vector<std::string>& unknown);
std::vector<std::string> recompute_module_names();
bool parse_schedule(const std::string& text, ScheduleKind& out);
bool parse_recompute(const std::string& text, Recompute& out);
bool parse_precision(const std::string& text, Precision& out);
std::vector<std::string> schedule_names();
std::vector<std::string> recompute_names();
std::vector<std::string> precision_names();

// The defaults below are what `trident train` runs (the CPU runtime: unfused attention, bucketed
// DP overlap through the grad-ready hook, blocking TP collectives and pipeline sends, fp32 main
// grads). plan, lint, simulate and train all start from them: this is the one place they live.
struct ExecutionSpec {
  int64_t global_batch_size = 0;  // sequences per optimizer step; 0 = choose a default
  int64_t micro_batch_size = 1;   // sequences per micro-batch per pipeline
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t virtual_stages = 1;     // model chunks per GPU (interleaved schedule)
  // Megatron's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split:
  // the embedding (loss) counts as one layer when the layers are split, so the first (last) chunk
  // holds one layer less; (layers + units) must divide over pp x v chunks (126 layers + 2 over
  // NVIDIA's pp 16 x v 8 for Llama 3.1 405B: a chunk of the embedding alone, one of the loss alone).
  bool embedding_in_pipeline_split = false;
  bool loss_in_pipeline_split = false;
  // Megatron-Core's --pipeline-model-parallel-layout (--pipeline-layout): the decoder layers of each
  // chunk as given, instead of the even split (plan::chunk_layers); empty: the even split.
  PipelineLayout pipeline_layout;
  int zero = 0;                   // ZeRO stage 0..3 (1 = distributed optimizer)
  Recompute recompute = Recompute::None;
  RecomputeModules recompute_modules;  // with recompute selective; none named: core_attn (Megatron's default)
  bool sequence_parallel = false;
  Precision precision = Precision::BF16;
  int grad_bits = 32;             // gradient element size in bits: 32 (Megatron main grads) or 16
  AttentionKind attention = AttentionKind::Unfused;
  // Selective recomputation under flash attention also reruns the fused attention forward before
  // the backward (Megatron-Core checkpoints the core attention); off, it recomputes nothing more
  // than the fused backward already does. Unfused attention always recomputes its scores.
  bool recompute_flash_attention = false;
  Overlap overlap;
  RecipeSettings recipe;
  std::string stack;              // the --stack preset these came from, "" when none

  // Micro-batches per pipeline per step: B / (b * dp).
  int64_t micro_batches(int64_t dp) const { return global_batch_size / (micro_batch_size * dp); }
};

// Whether the gradient reduction (and ZeRO's weight gather) runs behind compute at `pp` stages:
// --overlap dp, unless the stack reduces after the pipeline flush (dp_after_pipeline_flush).
bool dp_overlapped(const ExecutionSpec& e, int64_t pp);

// Whether pipeline messages at tp x pp are 1/tp shares the receiver all-gathers (Megatron-LM's
// scatter/gather): only without sequence parallel and without whole-tensor sends. Trident's
// runtime and Megatron-Core never send them.
bool pipeline_sends_scattered(const ExecutionSpec& e, int64_t tp, int64_t pp);

// Named software stacks: each sets several of the settings above together (explicit flags win).
struct StackPreset {
  std::string name;
  std::string description;  // what it sets and why, for --help and the README
  AttentionKind attention;
  Overlap overlap;
  int grad_bits;
  int zero;                 // -1: leave as is
  bool zero_fixed = false;  // the framework has no other stage: the search keeps `zero`
  bool recompute_flash_attention = false;  // selective recompute reruns the fused attention forward
  RecipeSettings recipe{};                 // what the framework does by default
  // The pipeline schedules the framework runs (DeepSpeed's pipeline engine: 1F1B only; Megatron:
  // 1F1B and interleaved, no GPipe or zero-bubble): another one asked for is refused, the search
  // tries these alone. Empty: every schedule.
  std::vector<ScheduleKind> schedules{};
  // Under fp16 the framework reduces gradients in fp32 even where it reduces bf16 ones in 16 bits
  // (Megatron: --grad-reduce-in-bf16 exists, an fp16 reduction does not).
  bool fp16_grads_in_fp32 = false;
  // The framework issues each kernel from Python (PyTorch eager, op by op): the host's issue time
  // per kernel (CostTable::host_launch_us) is a floor under a micro-batch's time (plan/host_issue.h).
  // Trident's runtime issues its kernels from C++, at the GPU's own per-kernel cost.
  bool python_issued = false;
  bool runs(ScheduleKind s) const;  // whether `schedules` holds s (or is empty)
};
const std::vector<StackPreset>& stack_presets();
const StackPreset* find_stack(const std::string& name);
std::vector<std::string> stack_names();
// Sets what the preset sets on `e`.
void apply_stack(const StackPreset& stack, ExecutionSpec& e);
// Whether e's stack issues its kernels from Python (StackPreset::python_issued); false with no stack.
bool python_issued(const ExecutionSpec& e);

}  // namespace trident
