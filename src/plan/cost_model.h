// Step-time cost model: every term of one training step, each with its inputs, so the planner,
// the lint rules and the simulator (src/sim/) compute time the same way.
//
// Units: seconds, bytes, FLOP, bytes per second (core/units.h). Every function is pure.
// Formulas and sources: docs/formulas.md. The efficiency factors are one table per GPU type
// (data/cost/builtin.toml), the same for every model and layout; bench/plan/plan_calibration.cpp
// holds them against published runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/chunk_layers.h"
#include "core/cost_table.h"
#include "core/execution_spec.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/vocab_padding.h"
#include "plan/host_issue.h"
#include "plan/kernel_calls.h"
#include "plan/zero_phases.h"

namespace trident::plan {

// Achieved-over-peak factors, per GPU type, as data (core/cost_table.h, data/cost/builtin.toml).
using CostConstants = CostTable;

// The built-in [default] table (A100-calibrated); estimates of a run use cost_table(run) instead.
const CostConstants& default_constants();

// ---------------------------------------------------------------------------------------------
// Shapes shared by the memory and time models.

// Megatron pads the vocabulary to a multiple of 128 * tp so every shard is aligned:
// 50257 -> 50304 at tp 1, 51200 at tp 8. The one helper the runtime allocates by.
using trident::padded_vocab;

// Layers of each pipeline chunk, the even split: core/chunk_layers.h.
using trident::chunk_layers;
// Layers held by stage i (all its chunks).
std::vector<int64_t> stage_layers(int64_t layers, int64_t pp, int64_t virtual_stages);
// The run's split: the decoder layers of each chunk of its --pipeline-layout when it gives one
// (Megatron-Core's --pipeline-model-parallel-layout), else chunk_layers; v = the virtual stages
// of an interleaved schedule, else 1. Every cost and memory term takes its split from here.
std::vector<int64_t> chunk_layers(int64_t layers, int64_t pp, const ExecutionSpec& exec);
std::vector<int64_t> stage_layers(int64_t layers, int64_t pp, const ExecutionSpec& exec);

// ---------------------------------------------------------------------------------------------
// GEMM efficiency as a function of its size.

// m x k times k x n. efficiency = peak_eff * prod_d d / (d + half_dim): large GEMMs approach
// peak_eff, thin ones (a small d) lose tiles to padding and waves.
double gemm_efficiency(double m, double k, double n, const CostConstants& c);
// Same curve towards another large-GEMM share (FP8: fp8_gemm_efficiency of the FP8 peak).
double gemm_efficiency(double m, double k, double n, double peak_efficiency, const CostConstants& c);
// 2mkn FLOP (batched: times batch) over peak * efficiency, plus the launch overhead.
double gemm_time_s(double m, double k, double n, double batch, double peak_flops, const CostConstants& c);
double gemm_time_s(double m, double k, double n, double batch, double peak_flops, double peak_efficiency,
                   const CostConstants& c);

// Communication overlapped with `window` seconds of compute. A pipelined overlap splits the
// transfer in `steps` pieces and the first cannot hide (steps 0: a transfer issued ahead, all of
// it can hide); what the window cannot cover stays exposed; the hidden part slows the compute by
// overlap_slowdown of itself.
struct Overlapped {
  double total_s = 0, exposed_s = 0, hidden_s = 0;
  double cost_s = 0;  // on the critical path: exposed + overlap_slowdown x hidden
};
Overlapped overlap_with(double comm_s, double window_s, double steps, const CostConstants& c);
// Not overlapped: everything exposed.
Overlapped not_overlapped(double comm_s);

// ---------------------------------------------------------------------------------------------
// Collectives (alpha-beta, Thakur et al. 2005). bytes = the full buffer S each rank holds.

double link_efficiency(LinkKind kind, const CostConstants& c);
// The cost table's field of that share (the self-calibration fits and transfers it per link kind).
double CostConstants::*link_efficiency_field(LinkKind kind);
double p2p_time_s(double bytes, const GroupLink& link, const CostConstants& c);
double ring_allreduce_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c);
// All-gather or reduce-scatter of an S-byte buffer: (n-1) alpha + (n-1)/n S / beta.
double ring_allgather_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c);
// Hierarchical all-reduce: g GPUs per node on `intra`, k nodes on `inter` (per-GPU NIC share):
// 2[(g-1) a_n + (g-1)/g S/B_n] + 2(k-1) a_i + 2(k-1)/k (S/g)/B_i.
double hierarchical_allreduce_time_s(double bytes, int64_t g, int64_t k, const LinkSpec& intra,
                                     double inter_Bps_per_gpu, double inter_latency_s,
                                     const CostConstants& c);

// ---------------------------------------------------------------------------------------------
// Per-layer compute of one micro-batch on one GPU of a TP group.

// HBM bytes to quantise one GEMM input element: fp8_cast_bytes_per_element (read 2, write fp8's
// one byte) plus what the precision writes beyond that byte (quantized_copies x
// quantized_element_bytes - 1: mxfp8 rowwise and columnwise with their scales, 2 x 1.03125 - 1;
// nvfp4 2 x 0.5625 - 1). The same for fp8 and every quantised format: one formula.
double cast_bytes_per_element(Precision p, const CostConstants& c);

struct LayerCompute {
  // inputs
  int64_t tokens = 0;  // b * s / cp
  int64_t tp = 1;
  int64_t cp = 1;
  double block_attention_s = 0;    // cp > 1: attention against one KV block of the ring (attention_s / cp)
  double block_attention_backward_s = 0;  // and its backward (attention_backward_s / cp)
  // forward pass of one layer
  AttentionKind attention = AttentionKind::Unfused;
  bool fp8 = false;                // weight GEMMs quantised (fp8, mxfp8, nvfp4: at its peak, plus casts)
  double gemm_flops = 0;           // QKV, projection, MLP: 24 b s h^2 / t (GPT); Llama per its shapes
  double attention_flops = 0;      // QK^T and AV as model FLOPs: 4 b s^2 h / t (flash executes half: causal)
  double gemm_s = 0;               // time of the four weight GEMMs
  double column_gemm_s = 0;        // of it the column-parallel ones, QKV and the dense MLP-in (their weight-gradient GEMMs take as long)
  double attention_s = 0;          // unfused: the two batched GEMMs; flash: the fused forward kernel
  double attention_backward_s = 0; // unfused: 2 x attention_s; flash: flash_backward_factor x attention_s
  double stored_activation_bytes = 0;  // what the layer keeps for backward (Korthikanti Table 2)
  double attention_core_bytes = 0;     // the 5 a s^2 b / t part of it (softmax, dropout); 0 with flash
  double elementwise_s = 0;        // memory-bound kernels, forward (FP8 casts included)
  double attention_elementwise_s = 0;  // softmax + dropout part of elementwise_s (0 with flash)
  double fp8_cast_s = 0;           // FP8 quantisation of the GEMM inputs, part of elementwise_s
  // FP8 GEMM input elements cast by kernels of their own (fp8_cast_s), and those whose cast is
  // fused into the kernel before the GEMM (recipe fp8_fused_casts: no traffic of their own).
  double fp8_cast_elements = 0, fp8_fused_cast_elements = 0;
  // What the fused casts would take on their own: the forward saves it, the backward does not
  // (its gradient casts are cast-transposes of their own, paid 2x as the rest of its traffic).
  double fp8_fused_cast_s = 0;
  // Mixture of experts: the routed experts' forward GEMMs at the balanced load (part of gemm_s,
  // the dense layers' share 0), what an imbalance makes the other ep ranks wait for.
  double moe_routed_s = 0;
  // The router's score function and top-k (MoeCompute::score_s), part of elementwise_s.
  double moe_score_s = 0;
  // --recompute-modules other than core_attn: their forwards again (plan/recompute_modules.h).
  double module_recompute_s = 0, module_recompute_flops = 0;
  // Fixed cost of each kernel call (kernel_launch_us), times the layer's calls per pass.
  KernelCalls kernels;
  double kernel_call_s = 0;
  double launch_forward_s() const { return kernel_call_s * double(kernels.forward.total()); }
  double launch_backward_s() const { return kernel_call_s * double(kernels.backward.total()); }
  double launch_recompute_s() const { return kernel_call_s * double(kernels.recompute.total()); }
  double forward_s() const { return gemm_s + attention_s + elementwise_s + launch_forward_s(); }
  // dgrad + wgrad for the weight GEMMs, 2x the memory traffic, attention per its kernels.
  double backward_s() const {
    return 2 * (gemm_s + elementwise_s + fp8_fused_cast_s) + attention_backward_s + launch_backward_s();
  }
  double forward_flops() const { return gemm_flops + attention_flops; }
};

// With cp > 1 the rank holds s / cp tokens and runs attention as cp blocks (context_parallel.h);
// a MoE model's MLP is its router and experts (mixture_of_experts.h), ep ranks sharing them.
LayerCompute layer_compute(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, const GpuSpec& gpu,
                           const CostConstants& c, int64_t cp = 1, int64_t ep = 1, int64_t etp = 1);

// TP collectives of one layer for one micro-batch. Megatron: 2 all-reduces forward and 2
// backward of b*s*h 16-bit elements; with sequence parallel each is a reduce-scatter plus an
// all-gather of the same volume; full recomputation repeats the forward ones.
struct TpComm {
  double message_bytes = 0;     // b * s * h * 2
  int64_t forward_collectives = 0;
  int64_t backward_collectives = 0;  // including the recomputed forward ones
  double collective_s = 0;      // one collective on the TP group's link
  double forward_s = 0;
  double backward_s = 0;
};
TpComm tp_comm_per_layer(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, const GroupLink& link,
                         const CostConstants& c);

// The TP collectives of one layer after overlap (the stack's --overlap tp): forward behind its
// weight GEMMs, backward behind dgrad + wgrad (and full recomputation's GEMMs), pipelined in tp
// pieces of which the first waits; without overlap all exposed. The overlap needs sequence
// parallelism (Megatron-Core's --tp-comm-overlap, Transformer Engine's userbuffers, refuses to
// run without it); without it the forward's all-reduces block and backward only the column-
// parallel layers' input-gradient all-reduces run, each whole, behind their weight-gradient
// GEMMs (Megatron's asynchronous all-reduce); full recomputation's forward all-reduces block.
struct TpOverlap {
  Overlapped forward, backward;
};
TpOverlap tp_overlap_per_layer(const LayerCompute& lc, const TpComm& tc, const ExecutionSpec& exec, int64_t tp,
                               const CostConstants& c);

// ZeRO-3 / FSDP for one chunk of `layers` consecutive layers and one micro-batch: each layer's
// weights all-gathered before its forward and again before its backward, its gradients
// reduce-scattered after its backward. With --overlap dp the next layer's traffic runs behind
// this layer's compute (a layer too short leaves the rest exposed: network-bound); the chunk's
// first gather (forward) and last reduce-scatter (backward) have nothing to hide behind (the
// backward starts on the weights the forward left gathered). Without overlap everything waits.
// cost_s = exposed + overlap_slowdown x hidden.
struct Zero3Chunk {
  Overlapped forward, backward;
};
Zero3Chunk zero3_chunk(double gather_s, double scatter_s, double layers, double forward_layer_s,
                       double backward_layer_s, bool overlap, const CostConstants& c);

// Pipeline sends of one micro-batch at one stage boundary: b*s*h 16-bit activations forward and
// as many gradient bytes backward. Under sequence parallelism each TP rank sends its own s/t rows.
// Without it each TP rank sends the whole tensor (pipeline_sends_whole_tensor: Megatron-Core,
// DeepSpeed's pipeline engine, torchtitan), or 1/t of it and the receiver all-gathers the shares
// over the TP link before using them (Megatron-LM's scatter/gather up to 2022:
// gather_split_1d_tensor after the blocking exchange, on the critical path).
struct PpComm {
  double activation_bytes = 0;  // b x s x h x element bytes: the whole tensor
  int64_t split = 1;            // what each TP rank sends of it: 1/split (tp, or 1 for the whole tensor)
  double message_bytes = 0;     // activation_bytes / split
  double wire_s = 0;            // one send on the PP link
  double gather_s = 0;          // the receiver's all-gather of the split shares on the TP link (0 with SP)
  double message_s = 0;         // wire_s + gather_s: one message on the critical path
};
PpComm pp_comm_per_message(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, const GroupLink& pp_link,
                           const GroupLink& tp_link, const CostConstants& c);

// One pipeline stage's work for one micro-batch (all its chunks together).
// One chunk of a stage (the interleaved schedule's virtual stage; the stage itself otherwise) for
// one micro-batch: the planner's per-chunk cost object. Its layers' per-layer terms, the embedding
// on the first chunk and the logits, loss and MTP modules on the last; stage_times sums a stage's
// chunks into its StageTime and the simulator plays them on the schedule as they are.
struct ChunkTime {
  int64_t layers = 0;
  double compute_forward_s = 0, compute_backward_s = 0;  // the backward with its recomputation
  double weight_grad_s = 0;  // of compute_backward_s: the weight-gradient GEMMs (zb-h1's W pass)
  double tp_forward_s = 0, tp_backward_s = 0;            // TP on the critical path (after overlap)
  double cp_forward_s = 0, cp_backward_s = 0;            // the ring exchange not hidden behind attention
  double ep_forward_s = 0, ep_backward_s = 0;            // the MoE all-to-alls (after --moe-ep-overlap)
  double ep_wait_forward_s = 0, ep_wait_backward_s = 0;  // and the wait in them for the most loaded ep rank
  // Filled by estimate(): ZeRO-3's per-layer gathers and reduce-scatters (cost: exposed + the
  // hidden part's slowdown) and the GPU's wait for the host's issue of the chunk's kernels.
  double zero3_forward_s = 0, zero3_backward_s = 0;
  double host_forward_s = 0, host_backward_s = 0;
  // `n` layers of a per-layer chunk: every term times n.
  ChunkTime times(int64_t n) const;
};

struct StageTime {
  int64_t stage = 0;
  int64_t layers = 0;
  bool first = false, last = false;
  double compute_forward_s = 0;   // layers + embedding (first) + logits and loss (last)
  double compute_backward_s = 0;  // including recomputation
  double recompute_s = 0;         // the part of compute_backward_s that recomputes the forward
  double tp_comm_s = 0;           // forward + backward TP collectives on the critical path (after overlap)
  double pp_comm_s = 0;           // its sends on the critical path: 2 per chunk (activation, gradient)
  double tp_total_s = 0, tp_hidden_s = 0;  // TP collectives before overlap, and the part hidden
  double pp_total_s = 0, pp_hidden_s = 0;
  double cp_comm_s = 0;           // ring exchange of KV blocks not hidden behind attention
  double cp_total_s = 0;          // the whole ring exchange (cp_total_s - cp_comm_s hides behind attention)
  double ep_comm_s = 0;           // MoE dispatch and combine all-to-alls (nothing to hide behind)
  double ep_wait_s = 0;           // and the wait in them for the most loaded ep rank's experts (ep_wait_per_layer)
  // ZeRO-3 / FSDP per-layer gathers and reduce-scatters of this micro-batch (estimate() fills them
  // from zero3_stage): on the critical path (exposed + slowdown of the hidden part), and in all.
  double zero3_s = 0, zero3_total_s = 0, zero3_hidden_s = 0;
  double executed_flops = 0;      // with recomputation (and flash attention's recompute of the scores)
  double model_flops = 0;         // without
  double flash_recompute_flops = 0;  // flash backward recomputes QK^T: in executed_flops, not in model FLOPs
  // Kernel calls of one micro-batch on this stage (layers, embedding, logits; recompute included)
  // and their fixed cost, which compute_forward_s and compute_backward_s include.
  int64_t kernel_calls = 0;
  double launch_s = 0;
  KernelCalls layer_kernels;  // one layer's, by kind and by CUDA graph scope
  // The host's issue of this micro-batch (plan/host_issue.h, estimate() fills it after the ZeRO-3
  // traffic) and the GPU's wait for it, host_issue.exposed_s: on the critical path.
  HostIssue host_issue;
  double host_s = 0;
  std::vector<ChunkTime> chunks;  // its chunks (v of them interleaved), whose sums the terms above are
  double gpu_s() const {
    return compute_forward_s + compute_backward_s + tp_comm_s + pp_comm_s + cp_comm_s + ep_comm_s + ep_wait_s + zero3_s;
  }
  double total_s() const { return gpu_s() + host_s; }
};

struct StageInputs {
  int64_t tp = 1, pp = 1;
  GroupLink tp_link, pp_link;
  int64_t cp = 1, ep = 1;
  GroupLink cp_link, ep_link;
  int64_t etp = 1;  // expert tensor parallel (the expert grid's, core/mesh.h)
  GroupLink etp_link;
  // The ep group's members in one NVLink domain and the NVLink between them (plan::ep_links):
  // its all-to-all is hierarchical when the group leaves its domain; 0: all on ep_link.
  int64_t ep_members_in_domain = 0;
  GroupLink ep_domain_link;
};
// The rates a stack's kernels run against: its matrix products' peak (bf16, or fp32; FP8's GEMMs
// have their own, plan::peak_flops) and the HBM rate of its memory-bound kernels.
double stack_peak_flops(const ExecutionSpec& e, const GpuSpec& gpu);
double kernel_hbm_Bps(const ExecutionSpec& e, const GpuSpec& gpu, const CostConstants& c);
// Each stage's time for one micro-batch, built from its chunks (plan/stage_times.cpp).
std::vector<StageTime> stage_times(const ModelSpec& model, const ExecutionSpec& exec, const StageInputs& in,
                                   const GpuSpec& gpu, const CostConstants& c);

// Data-parallel gradient reduction after backward, bucketed and partly hidden behind the last
// micro-batch's backward pass.
struct DpComm {
  double gradient_bytes = 0;       // this GPU's gradient buffer
  int64_t dp = 1;
  int64_t gpus_per_node_in_group = 1, nodes = 1;  // hierarchical shape of the group
  bool hierarchical = false;       // true when the group spans nodes with >1 member per node
  double total_s = 0;              // the whole reduction
  double overlap_window_s = 0;     // backward time it can hide behind
  double exposed_s = 0;            // what remains on the critical path
  double hidden_s = 0;             // total_s minus the exposed part (estimate() fills it, with the overlap slowdown)
  double embedding_sync_s = 0;     // tied embedding all-reduce between first and last stage
  double layer_gather_s = 0;       // ZeRO-3: one layer's weight all-gather
  double layer_scatter_s = 0;      // ZeRO-3: one layer's gradient reduce-scatter
  // ZeRO-3, MoE: one layer's local routed experts (their parameters on one GPU), all-gathered
  // over the expert data parallel group and their gradients reduce-scattered there, besides the
  // dense gather and scatter above.
  double expert_layer_params = 0, expert_layer_gather_s = 0, expert_layer_scatter_s = 0;
  int64_t chunks = 1;              // pieces overlapped on their own (dp_overlap.h): v with per-chunk overlap
  int64_t chunk_group = 1;         // micro-batches per chunk in turn, min(m, pp)
  double weight_gather_exposed_s = 0;  // ZeRO 1-3: the weight all-gathers' part of exposed_s (before
                                       // the overlap slowdown; ZeRO-3: by volume, 2 gathers per scatter)
};
DpComm dp_comm(double gradient_bytes, int64_t dp, const GroupLink& dp_link, int64_t members_per_node,
               const ClusterSpec& cluster, double overlap_window_s, const CostConstants& c);

// The data-parallel phases of one step (zero_phases.h says which, when and how often), each
// timed on the group's link; the step's exposed DP time is built from these in estimate.cpp and
// the simulator plays them (sim/plan_costs.cpp).
struct DpPhases {
  double allreduce_s = 0;       // one full all-reduce of the gradient buffer (ring or hierarchical)
  double reduce_scatter_s = 0;  // one reduce-scatter of the gradient buffer
  double gather_weights_s = 0;  // one all-gather of the 16-bit weights
  int64_t reduce_scatters_per_step = 0;  // 0, 1 (ZeRO 1) or m (ZeRO 2/3)
  int64_t weight_gathers_per_step = 0;   // 1 (ZeRO 1/2) or 2m (ZeRO 3)
  std::vector<ZeroPhase> phases;         // zero_phases(), seconds filled
};
DpPhases dp_phases(double gradient_bytes, double weight_bytes, int64_t dp, int zero, int64_t micro_batches,
                   const GroupLink& dp_link, int64_t members_per_node, const ClusterSpec& cluster,
                   const CostConstants& c);

// Optimizer step: memory-bound Adam over this GPU's (sharded) parameters.
struct OptimizerTime {
  double params = 0;            // parameters this GPU updates
  double bytes_per_param = 0;   // HBM traffic per parameter
  std::string inputs;           // how bytes_per_param adds up ("" when the cost table sets it)
  double time_s = 0;
};
// Traffic per parameter: read and write each optimizer state (StateBytes: master, momentum,
// variance at optimizer_state_bits), read the gradient, write the weights as gathered.
OptimizerTime optimizer_time(double params_updated, const ExecutionSpec& exec, const GpuSpec& gpu,
                             const CostConstants& c);

// Pipeline step of m micro-batches: the slowest stage paces the steady state, the others add the
// fill and drain, shortened by v (interleaving) or to a third (ZB-H1):
//   pipeline_s = m * T_max + (sum_i T_i - T_max) / k,  k = v (interleaved), 3 (zb-h1), 1 otherwise.
// Uniform stages give the closed form (m + (p-1)/k) T.
struct PipelineTime {
  double slowest_stage_s = 0;  // T_max, one micro-batch
  int64_t slowest_stage = 0;
  double steady_s = 0;         // m * T_max
  double bubble_s = 0;
  double total_s = 0;
};
PipelineTime pipeline_time(const std::vector<StageTime>& stages, int64_t micro_batches, ScheduleKind schedule,
                           int64_t virtual_stages);

// A step time no estimate of this recipe can beat, whichever of `tp_links` (one per rank order)
// its TP group lands on: the pipeline above over each layer's compute and TP cost alone (forward,
// backward and full recompute, the TP collectives as stage_times charges them on the fastest of
// the links; no other communication, no embedding or logits, no DP or optimizer). Below ZeRO 3:
// (m - 1/k) x the fullest stage's layers + all layers / k; with ZeRO 3, (m + (p-1)/k) x the least
// loaded stage's. The search skips a recipe whose bound already loses.
double step_time_lower_bound(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t pp, int64_t cp,
                             int64_t ep, int64_t micro_batches, const std::vector<GroupLink>& tp_links,
                             const GpuSpec& gpu, const CostConstants& c, int64_t etp = 1);

// FLOPs of one step for the whole model (72 B s L h^2 (1 + s/6h + V/12Lh) for GPT). A MoE model
// counts the matrices a token uses: router, k routed and the shared experts (active parameters).
// Attention's score and value products (4 s^2 h per layer forward) are counted in full, as
// Korthikanti et al. 2022, PaLM and the Llama 3 paper count them; `causal_halved` counts the
// half a causal mask keeps (2 s^2 h), as current Megatron-LM and Megatron-Bridge do.
double model_flops_per_step(const ModelSpec& model, int64_t global_batch, int64_t vocab_padded,
                            bool causal_halved = false);
// The MLP matrix parameters one token uses per layer, averaged over the layers: m h f for a
// dense layer (m = 2 GELU, 3 SwiGLU matrices), (k + shared) m h f_e + h E (top-k routed experts,
// the shared ones, the router) for a MoE layer.
double active_mlp_params_per_layer(const ModelSpec& model);

}  // namespace trident::plan
