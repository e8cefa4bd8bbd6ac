#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/pipeline_bubble.h"
#include "plan/context_parallel.h"
#include "plan/memory_model.h"
#include "plan/recompute_modules.h"
#include "plan/mfu.h"
#include "plan/mixture_of_experts.h"

namespace trident::plan {

const CostConstants& default_constants() {
  static const CostConstants c = builtin_cost(GpuSpec{});  // [default]: no GPU table matches
  return c;
}

double gemm_efficiency(double m, double k, double n, double peak_efficiency, const CostConstants& c) {
  auto shape = [&](double d) { return d / (d + c.gemm_half_dim); };
  return peak_efficiency * shape(m) * shape(k) * shape(n);
}
double gemm_efficiency(double m, double k, double n, const CostConstants& c) {
  return gemm_efficiency(m, k, n, c.gemm_peak_efficiency, c);
}

double gemm_time_s(double m, double k, double n, double batch, double peak_flops, double peak_efficiency,
                   const CostConstants& c) {
  if (m <= 0 || k <= 0 || n <= 0 || batch <= 0) return 0;
  // The launch of each kernel is counted once per call (layer_kernel_calls), not here.
  return 2 * m * k * n * batch / (peak_flops * gemm_efficiency(m, k, n, peak_efficiency, c));
}
double gemm_time_s(double m, double k, double n, double batch, double peak_flops, const CostConstants& c) {
  return gemm_time_s(m, k, n, batch, peak_flops, c.gemm_peak_efficiency, c);
}

Overlapped overlap_with(double comm_s, double window_s, double steps, const CostConstants& c) {
  Overlapped o;
  o.total_s = comm_s;
  if (comm_s <= 0) return o;
  const double unhidden = steps >= 1 ? comm_s / steps : 0.0;
  o.exposed_s = std::min(comm_s, std::max(comm_s - std::max(window_s, 0.0), unhidden));
  o.hidden_s = comm_s - o.exposed_s;
  o.cost_s = o.exposed_s + c.overlap_slowdown * o.hidden_s;
  return o;
}

Overlapped not_overlapped(double comm_s) {
  Overlapped o;
  o.total_s = o.exposed_s = o.cost_s = std::max(comm_s, 0.0);
  return o;
}

double CostConstants::*link_efficiency_field(LinkKind kind) {
  switch (kind) {
    case LinkKind::NVLink: return &CostConstants::nvlink_efficiency;
    case LinkKind::PCIe: return &CostConstants::pcie_efficiency;
    case LinkKind::InfiniBand:
    case LinkKind::Ethernet: return &CostConstants::network_efficiency;
  }
  return &CostConstants::network_efficiency;
}

double link_efficiency(LinkKind kind, const CostConstants& c) { return c.*link_efficiency_field(kind); }

double p2p_time_s(double bytes, const GroupLink& link, const CostConstants& c) {
  if (bytes <= 0) return 0;
  return link.latency_s + bytes / (link.bandwidth_Bps * link_efficiency(link.kind, c));
}

double ring_allreduce_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bw = link.bandwidth_Bps * link_efficiency(link.kind, c);
  return 2.0 * (n - 1) * link.latency_s + 2.0 * (n - 1) / n * bytes / bw;
}

double ring_allgather_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bw = link.bandwidth_Bps * link_efficiency(link.kind, c);
  return double(n - 1) * link.latency_s + double(n - 1) / n * bytes / bw;
}

double hierarchical_allreduce_time_s(double bytes, int64_t g, int64_t k, const LinkSpec& intra,
                                     double inter_Bps_per_gpu, double inter_latency_s,
                                     const CostConstants& c) {
  if (bytes <= 0 || g * k <= 1) return 0;
  const double bn = intra.bandwidth_Bps * link_efficiency(intra.kind, c);
  const double bi = inter_Bps_per_gpu * c.network_efficiency;
  double t = 0;
  if (g > 1) t += 2 * ((g - 1) * intra.latency_s + double(g - 1) / g * bytes / bn);
  if (k > 1) t += 2 * (k - 1) * inter_latency_s + 2.0 * (k - 1) / k * (bytes / g) / bi;
  return t;
}

double cast_bytes_per_element(Precision p, const CostConstants& c) {
  return c.fp8_cast_bytes_per_element + double(quantized_copies(p)) * quantized_element_bytes(p) - 1;
}

namespace {
double activation_element_bytes(const ExecutionSpec& e) { return e.precision == Precision::FP32 ? 4 : 2; }
// The rates a stack's forward and backward kernels run against: the GPU's, times the share of
// them the stack reaches (RecipeSettings::compute_efficiency, 1 for the stack the tables measure).
// The peak of everything but FP8's matrix products: bf16 (fp8 recipes keep attention, norms and
// logits in bf16), or fp32.
double peak_flops(const ExecutionSpec& e, const GpuSpec& gpu) { return stack_peak_flops(e, gpu); }
// The quantised GEMMs' peak: FP8's for fp8 and mxfp8, FP4's for nvfp4 (plan::peak_flops).
double fp8_peak_flops(const ExecutionSpec& e, const GpuSpec& gpu) {
  return plan::peak_flops(gpu, e.precision) * e.recipe.compute_efficiency;
}
bool quantized_on(const ExecutionSpec& e, const GpuSpec& gpu) {
  return quantized_gemms(e.precision) && plan::peak_flops(gpu, e.precision) > 0;
}
}  // namespace

double stack_peak_flops(const ExecutionSpec& e, const GpuSpec& gpu) {
  return (e.precision == Precision::FP32 ? gpu.fp32_flops : gpu.bf16_flops) * e.recipe.compute_efficiency;
}
// HBM rate of the memory-bound kernels (norms, activations, softmax, casts, the loss).
double kernel_hbm_Bps(const ExecutionSpec& e, const GpuSpec& gpu, const CostConstants& c) {
  return gpu.hbm_Bps * c.hbm_efficiency * e.recipe.compute_efficiency;
}

MoeCompute layer_moe_compute(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, const GpuSpec& gpu,
                             const CostConstants& c, int64_t ep, int64_t etp) {
  const bool fp8 = quantized_on(e, gpu);
  // Quantised GEMMs read quantised weights and rows (their block scales included)
  const double element = fp8 ? quantized_element_bytes(e.precision) : activation_element_bytes(e);
  return moe_compute(m, double(e.micro_batch_size) * double(m.seq_len), tp, ep,
                     fp8 ? fp8_peak_flops(e, gpu) : peak_flops(e, gpu), fp8 ? c.fp8_gemm_efficiency : c.gemm_peak_efficiency,
                     c, etp, kernel_hbm_Bps(e, gpu, c), element, element);
}

LayerCompute layer_compute(const ModelSpec& full, const ExecutionSpec& e, int64_t tp, const GpuSpec& gpu,
                           const CostConstants& c, int64_t cp, int64_t ep, int64_t etp) {
  // Everything below is one cp rank's share: a sequence of s / cp, attention one block of it.
  const ModelSpec m = per_rank_sequence(full, cp);
  LayerCompute lc;
  lc.tp = tp;
  lc.cp = std::max<int64_t>(cp, 1);
  lc.attention = e.attention;
  lc.fp8 = quantized_on(e, gpu);
  lc.tokens = e.micro_batch_size * m.seq_len;
  const double T = double(lc.tokens), h = double(m.hidden), t = double(tp), f = double(m.ffn_hidden);
  // q: the width of Q and of the projection's input, heads x head_dim (= h unless the model
  // sets its own head_dim: Qwen3's 32 x 128 on h 2048).
  const double kv = double(m.kv_dim()), q = double(m.q_dim()), vw = double(m.v_dim()), s = double(m.seq_len),
               d = double(m.head_dim());
  const double peak = peak_flops(e, gpu);
  const double gemm_peak = lc.fp8 ? fp8_peak_flops(e, gpu) : peak;
  const double gemm_eff = lc.fp8 ? c.fp8_gemm_efficiency : c.gemm_peak_efficiency;
  // Weight GEMMs, forward, per GPU of the TP group: column-parallel QKV and MLP-in,
  // row-parallel projection and MLP-out.
  const double mlp_in = double(m.mlp_matrices() - 1) * f / t;  // GELU: f/t; SwiGLU gate+up fused: 2f/t
  auto gemm = [&](double k, double n) { return gemm_time_s(T, k, n, 1, gemm_peak, gemm_eff, c); };
  double qkv_s = gemm(h, (q + 2 * kv) / t), qkv_flops = 2 * T * h * (q + 2 * kv) / t;
  if (m.is_mla()) {
    // MLA: the down projections to the query latent and to the kv latent plus the rope key are
    // whole on every tp rank (Megatron's duplicated linears); the up projections split by heads.
    const double H = double(m.heads), qr = double(m.q_lora_rank), kvr = double(m.kv_lora_rank);
    const double qk = double(m.qk_nope_head_dim + m.qk_rope_head_dim), rope = double(m.qk_rope_head_dim);
    const double up_kv = H * double(m.qk_nope_head_dim + m.v_head_dim) / t;
    qkv_s = (qr > 0 ? gemm(h, qr) + gemm(qr, H * qk / t) : gemm(h, H * qk / t)) + gemm(h, kvr + rope) + gemm(kvr, up_kv);
    qkv_flops = 2 * T * ((qr > 0 ? h * qr + qr * H * qk / t : h * H * qk / t) + h * (kvr + rope) + kvr * up_kv);
  }
  lc.gemm_s = qkv_s + gemm(vw / t, h) + gemm(h, mlp_in) + gemm(f / t, h);
  lc.column_gemm_s = qkv_s + (1 - moe_layer_share(m)) * gemm(h, mlp_in);
  lc.gemm_flops = qkv_flops + 2 * T * h * (vw / t + mlp_in + f / t);
  // Attention: per head of this GPU, QK^T (s x d x s) and scores x V (s x s x d); MLA's scores
  // over nope + rope features, its values v_head_dim wide.
  const double batch = double(e.micro_batch_size) * double(m.heads) / t;
  lc.attention_flops = m.is_mla() ? 2 * batch * s * s * (q + vw) / double(m.heads) : 4 * batch * s * s * d;
  if (e.attention == AttentionKind::Flash) {
    // Sliding-window layers (GPT-OSS, Mistral) skip the keys outside their window: the fused
    // kernel's work is the share of keys attended (1 without windows; unfused kernels compute
    // every score and mask them).
    lc.attention_flops *= m.attended_key_share();
    // One fused kernel over the causal half of the scores; backward recomputes them.
    lc.attention_s = lc.attention_flops / 2 / (peak * c.attention_efficiency);
    lc.attention_backward_s = c.flash_backward_factor * lc.attention_s;
  } else {
    lc.attention_s = gemm_time_s(s, d, s, batch, peak, c) + gemm_time_s(s, s, d, batch, peak, c);
    lc.attention_backward_s = 2 * lc.attention_s;
  }
  // Stored activations without recomputation (what the forward kernels write).
  ExecutionSpec plain = e;
  plain.recompute = Recompute::None;
  const LayerActivations act = layer_activations(m, plain, tp, etp);
  lc.stored_activation_bytes = act.bytes;
  lc.attention_core_bytes = act.attention_scores_bytes;
  const double hbm = kernel_hbm_Bps(e, gpu, c);
  const double scale = c.elementwise_traffic_per_stored_byte * activation_element_bytes(e) / 2;
  lc.attention_elementwise_s = scale * act.attention_scores_bytes / hbm;
  // The FP8 copies are the casts' output, counted in fp8_cast_s below; the 16-bit inputs they
  // stand in for are still written by the forward's kernels (the norms, the activation).
  lc.elementwise_s = scale * (act.bytes + act.fp8_given_up_bytes - act.fp8_copy_bytes) / hbm;
  const ModuleRecompute mr = module_recompute(m, e, tp, T, gemm, scale / hbm, act.module_drop);
  lc.module_recompute_s = mr.s, lc.module_recompute_flops = mr.flops;
  if (lc.fp8) {
    // Each weight GEMM's input is quantised to FP8 first (the weights once per step: not counted):
    // QKV and FC1 read the norms' outputs (T h each), the projection the attention's (T h / t),
    // FC2 the activation's (T f / t). Fused, the norms and the activation write FP8 themselves.
    const FusedCasts fc = fused_fp8_casts(m, e);
    lc.fp8_cast_elements = T * ((fc.qkv ? 0 : h) + vw / t + (fc.fc1 ? 0 : h) + (fc.fc2 ? 0 : f / t));
    lc.fp8_fused_cast_elements = T * (h + vw / t + h + f / t) - lc.fp8_cast_elements;
    const double cast_bytes = cast_bytes_per_element(e.precision, c);
    lc.fp8_cast_s = cast_bytes * lc.fp8_cast_elements / hbm;
    lc.fp8_fused_cast_s = cast_bytes * lc.fp8_fused_cast_elements / hbm;
    lc.elementwise_s += lc.fp8_cast_s;
  }
  if (m.is_moe()) {
    // The dense MLP GEMMs give way to the router and the experts (dense layers averaged in); the
    // router's score function and top-k are memory-bound kernels of their own.
    const double dense_mlp_s = gemm(h, mlp_in) + gemm(f / t, h);
    const MoeCompute mc = layer_moe_compute(m, e, tp, gpu, c, ep, etp);
    lc.gemm_s += mc.mlp_s - dense_mlp_s;
    lc.gemm_flops += mc.mlp_flops - 2 * T * h * (mlp_in + f / t);
    lc.moe_routed_s = moe_layer_share(m) * mc.routed_s;
    lc.moe_score_s = mc.score_s;
    lc.elementwise_s += mc.score_s;
  }
  if (lc.cp > 1) {
    // Ring attention: the local queries against each of the cp KV blocks (with flash, the causal
    // half of each: load balancing gives every rank the same share of the mask).
    const double k = double(lc.cp);
    lc.block_attention_s = lc.attention_s;
    lc.block_attention_backward_s = lc.attention_backward_s;
    lc.elementwise_s += (k - 1) * lc.attention_elementwise_s;
    lc.attention_s *= k;
    lc.attention_backward_s *= k;
    lc.attention_flops *= k;
    lc.attention_elementwise_s *= k;
  }
  lc.kernels = layer_kernel_calls(full, e, tp, cp, ep);
  lc.kernel_call_s = c.kernel_overhead_s();
  return lc;
}

TpComm tp_comm_per_layer(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, const GroupLink& link,
                         const CostConstants& c) {
  TpComm tc;
  tc.message_bytes = double(e.micro_batch_size) * m.seq_len * m.hidden * activation_element_bytes(e);
  if (tp <= 1) return tc;
  tc.forward_collectives = 2;
  tc.backward_collectives = 2 + (e.recompute == Recompute::Full ? 2 : 0);
  // Sequence parallel: reduce-scatter + all-gather of the same total volume as one all-reduce.
  tc.collective_s = e.sequence_parallel ? 2 * ring_allgather_time_s(tc.message_bytes, tp, link, c)
                                        : ring_allreduce_time_s(tc.message_bytes, tp, link, c);
  tc.forward_s = tc.forward_collectives * tc.collective_s;
  tc.backward_s = tc.backward_collectives * tc.collective_s;
  return tc;
}

PpComm pp_comm_per_message(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, const GroupLink& pp_link,
                           const GroupLink& tp_link, const CostConstants& c) {
  PpComm pc;
  pc.activation_bytes = double(e.micro_batch_size) * m.seq_len * m.hidden * activation_element_bytes(e);
  // Under sequence parallel every stack sends each TP rank's s/tp rows; without it the whole
  // tensor, or (scatter/gather) 1/tp shares the receiver all-gathers.
  const bool whole = e.recipe.pipeline_sends_whole_tensor && !e.sequence_parallel;
  pc.split = whole ? 1 : std::max<int64_t>(tp, 1);
  pc.message_bytes = pc.activation_bytes / double(pc.split);
  pc.wire_s = p2p_time_s(pc.message_bytes, pp_link, c);
  if (pc.split > 1 && !e.sequence_parallel) pc.gather_s = ring_allgather_time_s(pc.activation_bytes, pc.split, tp_link, c);
  pc.message_s = pc.wire_s + pc.gather_s;
  return pc;
}

TpOverlap tp_overlap_per_layer(const LayerCompute& lc, const TpComm& tc, const ExecutionSpec& e, int64_t tp,
                               const CostConstants& c) {
  TpOverlap o;
  if (!e.overlap.tp) {
    o.forward = not_overlapped(tc.forward_s);
    o.backward = not_overlapped(tc.backward_s);
    return o;
  }
  const bool recomputes_tp = tc.backward_collectives > 2;  // full recomputation repeats the forward's
  if (!e.sequence_parallel) {
    o.forward = not_overlapped(tc.forward_s);
    const double async_s = 2 * tc.collective_s;  // QKV's and MLP-in's input gradients
    const Overlapped behind = overlap_with(async_s, lc.column_gemm_s, 0, c);
    const Overlapped blocking = not_overlapped(tc.backward_s - async_s);
    o.backward = {behind.total_s + blocking.total_s, behind.exposed_s + blocking.exposed_s,
                  behind.hidden_s + blocking.hidden_s, behind.cost_s + blocking.cost_s};
    return o;
  }
  o.forward = overlap_with(tc.forward_s, lc.gemm_s, double(tp), c);
  o.backward = overlap_with(tc.backward_s, 2 * lc.gemm_s + (recomputes_tp ? lc.gemm_s : 0), double(tp), c);
  return o;
}

Zero3Chunk zero3_chunk(double gather_s, double scatter_s, double layers, double fwd_layer, double bwd_layer,
                       bool overlap, const CostConstants& c) {
  Zero3Chunk z;
  if (layers <= 0) return z;
  z.forward.total_s = layers * gather_s;
  z.backward.total_s = layers * (gather_s + scatter_s);
  if (overlap) {
    // The first gather waits; each later one runs behind the layer before it. Backward starts on
    // the weights the forward left gathered; each layer's gather (of the next one down) and
    // reduce-scatter (of its own gradients) run behind its backward; the last reduce-scatter waits.
    const Overlapped f = overlap_with(gather_s, fwd_layer, 0, c);
    const Overlapped b = overlap_with(gather_s + scatter_s, bwd_layer, 0, c);
    z.forward.exposed_s = gather_s + (layers - 1) * f.exposed_s;
    z.backward.exposed_s = scatter_s + (layers - 1) * b.exposed_s;
  } else {
    z.forward.exposed_s = z.forward.total_s;
    z.backward.exposed_s = z.backward.total_s;
  }
  for (Overlapped* o : {&z.forward, &z.backward}) {
    o->hidden_s = std::max(0.0, o->total_s - o->exposed_s);
    o->cost_s = o->exposed_s + c.overlap_slowdown * o->hidden_s;
  }
  return z;
}

DpComm dp_comm(double gradient_bytes, int64_t dp, const GroupLink& link, int64_t members_per_node,
               const ClusterSpec& cluster, double overlap_window_s, const CostConstants& c) {
  DpComm d;
  d.gradient_bytes = gradient_bytes;
  d.dp = dp;
  d.overlap_window_s = overlap_window_s;
  if (dp <= 1 || gradient_bytes <= 0) return d;
  d.nodes = link.domain_count();  // NVLink domains: the network starts at their edge
  d.gpus_per_node_in_group = std::max<int64_t>(members_per_node, 1);
  d.hierarchical = d.nodes > 1 && d.gpus_per_node_in_group > 1;
  double allreduce_s;
  if (d.hierarchical)
    allreduce_s = hierarchical_allreduce_time_s(gradient_bytes, d.gpus_per_node_in_group, d.nodes, cluster.intra,
                                                cluster.inter_bandwidth_per_gpu_Bps(), cluster.inter.latency_s, c);
  else
    allreduce_s = ring_allreduce_time_s(gradient_bytes, dp, link, c);
  // One all-reduce whatever the ZeRO stage: ZeRO-3 callers count its per-layer gathers and
  // reduce-scatters instead (zero3_chunk), ZeRO 1-2 ones split this into its halves (dp_phases).
  d.total_s = allreduce_s;
  // Buckets are reduced while backward still runs; the last bucket always waits.
  const double last_bucket_s = d.total_s * std::min(1.0, c.dp_bucket_bytes() / gradient_bytes);
  d.exposed_s = std::max(d.total_s - overlap_window_s, last_bucket_s);
  return d;
}

DpPhases dp_phases(double gradient_bytes, double weight_bytes, int64_t dp, int zero, int64_t m, const GroupLink& link,
                   int64_t members_per_node, const ClusterSpec& cluster, const CostConstants& c) {
  DpPhases d;
  if (dp <= 1) return d;
  auto allreduce = [&](double bytes) {
    return dp_comm(bytes, dp, link, members_per_node, cluster, 0, c).total_s;
  };
  d.allreduce_s = allreduce(gradient_bytes);
  // Ring and hierarchical reduce-scatter / all-gather move half an all-reduce each.
  d.reduce_scatter_s = d.allreduce_s / 2;
  d.gather_weights_s = allreduce(weight_bytes) / 2;
  d.phases = zero_phases(zero, m, gradient_bytes, weight_bytes, dp);
  for (ZeroPhase& p : d.phases) {
    const bool gradients = p.buffer == DpBuffer::Gradients;
    p.seconds = p.collective == DpCollective::AllReduce ? d.allreduce_s
                : gradients                             ? d.reduce_scatter_s
                                                        : d.gather_weights_s;
    if (p.collective == DpCollective::ReduceScatter) d.reduce_scatters_per_step += p.per_step;
    if (p.collective == DpCollective::AllGather) d.weight_gathers_per_step += p.per_step;
  }
  return d;
}

OptimizerTime optimizer_time(double params, const ExecutionSpec& x, const GpuSpec& gpu, const CostConstants& c) {
  OptimizerTime o;
  o.params = params;
  const StateBytes sb = state_bytes(x);
  const int bits = x.recipe.optimizer_state_bits;
  if (c.optimizer_bytes_per_param > 0) {
    o.bytes_per_param = c.optimizer_bytes_per_param;
  } else if (x.precision == Precision::FP32) {
    o.bytes_per_param = 2 * sb.weights + 2 * sb.optimizer + sb.gradients;  // 8 + 16 + 4 at 32-bit states
    o.inputs = fmt::format("read+write weights 2 x {:g} B, momentum and variance 2 x {:g} B ({}-bit), read gradient {:g} B",
                           sb.weights, sb.optimizer, bits, sb.gradients);
  } else {
    // read+write master, momentum, variance; read the gradient; write the weight (16-bit, or FP8)
    o.bytes_per_param = 2 * sb.optimizer + sb.gradients + sb.gathered;  // 24 + g + 2 at 32-bit states
    o.inputs = fmt::format("read+write master, momentum, variance 2 x {:g} B ({}-bit), read gradient {:g} B, write "
                           "weights {:g} B{}",
                           sb.optimizer, bits, sb.gradients, sb.gathered, x.recipe.fp8_params ? " (FP8)" : "");
  }
  o.time_s = params * o.bytes_per_param / (gpu.hbm_Bps * c.hbm_efficiency);
  return o;
}

PipelineTime pipeline_time(const std::vector<StageTime>& stages, int64_t m, ScheduleKind schedule, int64_t v) {
  PipelineTime p;
  double sum = 0;
  for (const auto& s : stages) {
    sum += s.total_s();
    if (s.total_s() > p.slowest_stage_s) {
      p.slowest_stage_s = s.total_s();
      p.slowest_stage = s.stage;
    }
  }
  const double k = bubble_divisor(schedule, v);
  p.steady_s = double(m) * p.slowest_stage_s;
  p.bubble_s = (sum - p.slowest_stage_s) / k;
  p.total_s = p.steady_s + p.bubble_s;
  return p;
}

double step_time_lower_bound(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t pp, int64_t cp,
                             int64_t ep, int64_t micro_batches, const std::vector<GroupLink>& tp_links,
                             const GpuSpec& gpu, const CostConstants& c, int64_t etp) {
  const LayerCompute lc = layer_compute(m, e, tp, gpu, c, cp, ep, etp);
  // TP's cost grows with its collectives' time (overlapped or not): the fastest link's is the least.
  double tp_s = tp_links.empty() ? 0.0 : 1e300;
  for (const GroupLink& link : tp_links) {
    const TpOverlap o = tp_overlap_per_layer(lc, tp_comm_per_layer(per_rank_sequence(m, cp), e, tp, link, c), e, tp, c);
    tp_s = std::min(tp_s, o.forward.cost_s + o.backward.cost_s);
  }
  const double per_layer =
      lc.forward_s() + lc.backward_s() + (e.recompute == Recompute::Full ? lc.forward_s() : 0.0) + tp_s;
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;
  const auto layers = stage_layers(m.layers, pp, e);
  const auto [fewest, most] = std::minmax_element(layers.begin(), layers.end());
  const double k = bubble_divisor(e.schedule, v);
  const double mb = double(micro_batches);
  // The pipeline's m T_max + (sum T - T_max) / k = (m - 1/k) T_max + sum T / k grows with both:
  // T_max is at least the fullest stage's layers, sum T all layers. ZeRO-3's per-layer traffic,
  // in T but taken out of the step again, leaves only the least-loaded stage's share for each.
  if (e.zero < 3) return ((mb - 1 / k) * double(*most) + double(m.layers) / k) * per_layer;
  return (mb + double(pp - 1) / k) * double(*fewest) * per_layer;
}

double active_mlp_params_per_layer(const ModelSpec& m) {
  const double h = double(m.hidden), dense = double(m.mlp_matrices()) * h * double(m.ffn_hidden);
  if (!m.is_moe()) return dense;
  const double share = moe_layer_share(m);
  const double used = double(m.experts_per_token + m.shared_experts) * double(m.mlp_matrices()) * h *
                          double(m.expert_ffn_hidden) +
                      h * double(m.experts);
  return share * used + (1 - share) * dense;
}

double model_flops_per_step(const ModelSpec& m, int64_t global_batch, int64_t vocab, bool causal_halved) {
  const double s = double(m.seq_len), h = double(m.hidden), B = double(global_batch);
  const double kv = double(m.kv_dim()), q = double(m.q_dim()), vw = double(m.v_dim());
  double attention_params = h * (q + 2 * kv) + vw * h;
  if (m.is_mla()) {
    const double H = double(m.heads), qr = double(m.q_lora_rank), kvr = double(m.kv_lora_rank);
    attention_params = (qr > 0 ? h * qr + qr * q : h * q) + h * (kvr + double(m.qk_rope_head_dim)) +
                       kvr * H * double(m.qk_nope_head_dim + m.v_head_dim) + vw * h;
  }
  const double matrix_params = attention_params + active_mlp_params_per_layer(m);
  // Scores (s^2 per Q/K feature) and their product with V (s^2 per V feature), 2 FLOPs each:
  // 4 s^2 heads x head_dim unless MLA's V is narrower.
  const double per_layer_fwd = 2 * s * matrix_params + (causal_halved ? 1 : 2) * s * s * (q + vw);
  return 3 * B * (double(m.layers) * per_layer_fwd + 2 * s * h * double(vocab));
}

}  // namespace trident::plan
