// Each pipeline stage's time for one micro-batch, built from its chunks (ChunkTime): the per-layer
// terms times each chunk's layers, the embedding on the model's first chunk and the logits, loss
// and MTP modules on its last. The stage's terms are its chunks' sums, and the simulator plays the
// same chunks on the schedule (sim/plan_costs.cpp), so the two cannot compose a layer differently.
#include <algorithm>

#include "plan/context_parallel.h"
#include "plan/cost_model.h"
#include "plan/kernel_calls.h"
#include "plan/mfu.h"
#include "plan/mixture_of_experts.h"

namespace trident::plan {

ChunkTime ChunkTime::times(int64_t n) const {
  const double k = double(n);
  ChunkTime c;
  c.layers = n;
  c.compute_forward_s = k * compute_forward_s, c.compute_backward_s = k * compute_backward_s;
  c.weight_grad_s = k * weight_grad_s;
  c.tp_forward_s = k * tp_forward_s, c.tp_backward_s = k * tp_backward_s;
  c.cp_forward_s = k * cp_forward_s, c.cp_backward_s = k * cp_backward_s;
  c.ep_forward_s = k * ep_forward_s, c.ep_backward_s = k * ep_backward_s;
  c.ep_wait_forward_s = k * ep_wait_forward_s, c.ep_wait_backward_s = k * ep_wait_backward_s;
  c.zero3_forward_s = k * zero3_forward_s, c.zero3_backward_s = k * zero3_backward_s;
  c.host_forward_s = k * host_forward_s, c.host_backward_s = k * host_backward_s;
  return c;
}

std::vector<StageTime> stage_times(const ModelSpec& full, const ExecutionSpec& e, const StageInputs& in,
                                   const GpuSpec& gpu, const CostConstants& c) {
  const LayerCompute lc = layer_compute(full, e, in.tp, gpu, c, in.cp, in.ep, in.etp);
  const CpComm cpc = cp_comm_per_layer(full, e, in.tp, in.cp, in.cp_link, lc.block_attention_s,
                                       lc.block_attention_backward_s, c);
  const ModelSpec m = per_rank_sequence(full, in.cp);  // per-token terms below see s / cp
  const EpComm epc = ep_comm_per_layer(m, e, in.ep, EpLinks(in.ep_link, in.ep_members_in_domain, in.ep_domain_link), c,
                                       in.tp, in.etp, in.etp_link);
  const EpWait epw = ep_wait_per_layer(m, e, in.ep, lc.moe_routed_s);
  // --moe-ep-overlap: the all-to-alls behind the adjacent micro-batch's compute of the layer,
  // what stays on the critical path shared between forward and backward as their calls are.
  const Overlapped epo = ep_overlap_per_layer(epc, lc.forward_s(), lc.backward_s(), e, in.pp, c);
  const double ep_kept = epc.forward_s + epc.backward_s > 0 ? epo.cost_s / (epc.forward_s + epc.backward_s) : 1.0;
  const TpComm tc = tp_comm_per_layer(m, e, in.tp, in.tp_link, c);
  const PpComm pc = pp_comm_per_message(m, e, in.tp, in.pp_link, in.tp_link, c);
  const double peak = stack_peak_flops(e, gpu);
  const double T = double(lc.tokens), h = double(m.hidden), t = double(in.tp);
  const double V = double(padded_vocab(m.vocab, in.tp));
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;

  double recompute_per_layer = 0, recompute_flops_per_layer = 0;
  if (e.recompute == Recompute::Full) {
    recompute_per_layer = lc.forward_s();
    recompute_flops_per_layer = lc.forward_flops();
  } else if (recomputes_core_attention(e)) {
    // The core attention's forward again (unfused: its GEMMs, softmax and dropout; flash: one
    // more fused forward, as Megatron-Core's selective recompute runs it).
    recompute_per_layer = lc.attention_s + lc.attention_elementwise_s + lc.launch_recompute_s();
    recompute_flops_per_layer = lc.attention_flops;
  }
  recompute_per_layer += lc.module_recompute_s;  // 0 unless --recompute-modules names others
  recompute_flops_per_layer += lc.module_recompute_flops;
  const TpOverlap tpo = tp_overlap_per_layer(lc, tc, e, in.tp, c);
  const Overlapped &tp_fwd = tpo.forward, &tp_bwd = tpo.backward;
  // Output layer: logits GEMM (T x h x V/t), then the fp32 softmax cross-entropy over them.
  const double logits_gemm_s = gemm_time_s(T, h, V / t, 1, peak, c);
  const double logits_flops = 2 * T * h * V / t;
  const double loss_s = c.elementwise_traffic_per_stored_byte * 4 * T * V / t / kernel_hbm_Bps(e, gpu, c);

  // One layer: what every chunk is made of.
  ChunkTime layer;
  layer.compute_forward_s = lc.forward_s();
  layer.compute_backward_s = lc.backward_s() + recompute_per_layer;
  layer.weight_grad_s = lc.gemm_s;  // the weight-gradient GEMMs: as many FLOPs as the forward GEMMs
  layer.tp_forward_s = tp_fwd.cost_s, layer.tp_backward_s = tp_bwd.cost_s;
  layer.cp_forward_s = cpc.forward_exposed_s, layer.cp_backward_s = cpc.backward_exposed_s;
  layer.ep_forward_s = ep_kept * epc.forward_s, layer.ep_backward_s = ep_kept * epc.backward_s;
  layer.ep_wait_forward_s = epw.forward_s, layer.ep_wait_backward_s = epw.backward_s;

  const auto layers = stage_layers(m.layers, in.pp, e);
  const auto chunks = chunk_layers(m.layers, in.pp, e);
  std::vector<StageTime> out(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    StageTime& st = out[i];
    st.stage = int64_t(i);
    st.layers = layers[i];
    st.first = i == 0;
    st.last = i + 1 == layers.size();
    const double L = double(layers[i]);
    // Local chunk ch of stage i is the model's chunk ch x pp + i (the interleaved assignment).
    for (int64_t ch = 0; ch < v; ++ch) st.chunks.push_back(layer.times(chunks[size_t(ch * in.pp + int64_t(i))]));
    ChunkTime &head = st.chunks.front(), &tail = st.chunks.back();
    st.recompute_s = L * recompute_per_layer;
    st.model_flops = 3 * L * lc.forward_flops();
    // Flash attention's backward recomputes the scores (QK^T, half the attention FLOPs) from Q and K
    // instead of reading them: executed work the hardware does, no model FLOPs (MFU ignores it).
    st.flash_recompute_flops = e.attention == AttentionKind::Flash ? L * lc.attention_flops / 2 : 0.0;
    st.executed_flops = st.model_flops + L * recompute_flops_per_layer + st.flash_recompute_flops;
    st.tp_total_s = L * (tc.forward_s + tc.backward_s);
    st.tp_hidden_s = L * (tp_fwd.hidden_s + tp_bwd.hidden_s);
    st.cp_total_s = L * (cpc.forward_total_s + cpc.backward_total_s);
    // Around the embedding and the logits TP blocks (nothing to hide behind); the simulator plays
    // it in the end chunk's forward.
    auto blocking_tp = [&](ChunkTime& at, double x) {
      st.tp_total_s += x;
      at.tp_forward_s += x;
    };
    st.layer_kernels = lc.kernels;
    st.kernel_calls = layers[i] * lc.kernels.per_layer();
    if (st.first) st.kernel_calls += kEmbeddingKernels;
    if (st.last) st.kernel_calls += kLogitsKernels;
    st.launch_s = double(st.kernel_calls) * lc.kernel_call_s;
    if (st.first) {
      head.compute_forward_s += kEmbeddingForwardKernels * lc.kernel_call_s;
      head.compute_backward_s += (kEmbeddingKernels - kEmbeddingForwardKernels) * lc.kernel_call_s;
    }
    if (st.first && in.tp > 1) blocking_tp(head, tc.collective_s);  // vocab-parallel embedding all-reduce
    if (st.last) {
      tail.compute_forward_s += logits_gemm_s + loss_s + kLogitsForwardKernels * lc.kernel_call_s;
      tail.compute_backward_s += 2 * logits_gemm_s + loss_s + (kLogitsKernels - kLogitsForwardKernels) * lc.kernel_call_s;
      st.model_flops += 3 * logits_flops;
      st.executed_flops += 3 * logits_flops;
      if (in.tp > 1 && e.sequence_parallel) blocking_tp(tail, tc.collective_s);  // gather before logits, scatter back
      if (m.mtp_layers > 0) {
        // Multi-token prediction (DeepSeek-V3) after the last layer, on the last stage as Megatron
        // places it: per module its 2h -> h projection (split over tp), one layer like the model's
        // (its TP and EP traffic too) and another pass through the shared output layer and loss.
        const int64_t k = m.mtp_layers;
        const double proj_s = gemm_time_s(T, 2 * h, h / t, 1, peak, c), proj_flops = 2 * T * 2 * h * h / t;
        const ChunkTime mtp = layer.times(k);
        tail.compute_forward_s += mtp.compute_forward_s + double(k) * (proj_s + logits_gemm_s + loss_s);
        tail.compute_backward_s += mtp.compute_backward_s + double(k) * (2 * proj_s + 2 * logits_gemm_s + loss_s);
        tail.tp_forward_s += mtp.tp_forward_s, tail.tp_backward_s += mtp.tp_backward_s;
        tail.ep_forward_s += mtp.ep_forward_s, tail.ep_backward_s += mtp.ep_backward_s;
        tail.ep_wait_forward_s += mtp.ep_wait_forward_s, tail.ep_wait_backward_s += mtp.ep_wait_backward_s;
        st.model_flops += double(k) * 3 * (lc.forward_flops() + proj_flops + logits_flops);
        st.executed_flops += double(k) * (3 * (lc.forward_flops() + proj_flops + logits_flops) + recompute_flops_per_layer);
        st.tp_total_s += double(k) * (tc.forward_s + tc.backward_s);
        st.tp_hidden_s += double(k) * (tp_fwd.hidden_s + tp_bwd.hidden_s);
      }
      // The logits GEMM's backward is two GEMMs, one of them weight gradient: a third of what the
      // last chunk adds to its layers' backward (the MTP modules' likewise).
      tail.weight_grad_s += (tail.compute_backward_s - double(tail.layers) * layer.compute_backward_s) / 3;
    }
    for (const ChunkTime& ct : st.chunks) {
      st.compute_forward_s += ct.compute_forward_s;
      st.compute_backward_s += ct.compute_backward_s;
      st.tp_comm_s += ct.tp_forward_s + ct.tp_backward_s;
      st.cp_comm_s += ct.cp_forward_s + ct.cp_backward_s;
      st.ep_comm_s += ct.ep_forward_s + ct.ep_backward_s;
      st.ep_wait_s += ct.ep_wait_forward_s + ct.ep_wait_backward_s;
    }
    if (in.pp > 1) {
      st.pp_total_s = 2.0 * double(v) * pc.message_s;
      if (pp_overlapped(e.overlap, e.schedule)) {
        // Asynchronous sends run while the stage computes its next chunk: each hides behind
        // one chunk's forward (activation) or backward (gradient).
        const double chunk = double(chunks[i]);
        const Overlapped f = overlap_with(pc.message_s, chunk * lc.forward_s(), 0, c);
        const Overlapped b = overlap_with(pc.message_s, chunk * lc.backward_s(), 0, c);
        st.pp_comm_s = double(v) * (f.cost_s + b.cost_s);
        st.pp_hidden_s = double(v) * (f.hidden_s + b.hidden_s);
      } else {
        st.pp_comm_s = st.pp_total_s;
      }
    }
  }
  return out;
}

}  // namespace trident::plan
