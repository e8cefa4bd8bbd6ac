#include "plan/context_parallel.h"

#include <algorithm>

namespace trident::plan {

ModelSpec per_rank_sequence(const ModelSpec& m, int64_t cp) {
  ModelSpec local = m;
  if (cp > 1) local.seq_len = m.seq_len / cp;
  return local;
}

double kv_block_bytes(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t cp) {
  const double element = e.precision == Precision::FP32 ? 4 : 2;
  const double tokens = double(e.micro_batch_size) * double(m.seq_len) / double(std::max<int64_t>(cp, 1));
  // GQA: K and V have kv_heads heads; TP splits them (replicated when tp > kv_heads).
  const double kv_per_gpu = double(m.kv_dim()) / double(std::min<int64_t>(std::max<int64_t>(tp, 1), m.kv_heads));
  return tokens * 2 * kv_per_gpu * element;
}

double cp_ring_buffer_bytes(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t cp) {
  if (cp <= 1) return 0;
  if (e.recipe.cp_kind == CpKind::AllGather) return 2 * double(cp) * kv_block_bytes(m, e, tp, cp);
  return 4 * kv_block_bytes(m, e, tp, cp);
}

namespace {
// All-gathered K and V: forward behind the local block, backward a gather behind the local
// block's backward and an exposed reduce-scatter of the gradients.
void allgather_terms(CpComm& cc, const GroupLink& link, const CostConstants& c) {
  const double n = double(cc.cp);
  cc.gather_s = ring_allgather_time_s(n * cc.block_bytes, cc.cp, link, c);
  cc.forward_total_s = cc.gather_s;
  cc.forward_exposed_s = std::max(0.0, cc.gather_s - cc.block_attention_s);
  cc.backward_total_s = 2 * cc.gather_s;
  cc.backward_exposed_s = std::max(0.0, cc.gather_s - cc.block_attention_backward_s) + cc.gather_s;
}

// The ring: each of the cp - 1 transfers behind one block's attention; backward passes the KV
// block and its gradient each step, behind that block's backward attention.
void ring_terms(CpComm& cc, const GroupLink& link, const CostConstants& c) {
  cc.block_transfer_s = p2p_time_s(cc.block_bytes, link, c);
  cc.steps = cc.cp - 1;
  const double steps = double(cc.steps);
  cc.forward_total_s = steps * cc.block_transfer_s;
  cc.forward_exposed_s = steps * std::max(0.0, cc.block_transfer_s - cc.block_attention_s);
  cc.backward_total_s = 2 * cc.forward_total_s;
  cc.backward_exposed_s = steps * std::max(0.0, 2 * cc.block_transfer_s - cc.block_attention_backward_s);
}
}  // namespace

CpComm cp_comm_per_layer(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t cp, const GroupLink& link,
                         double block_attention_s, double block_attention_backward_s, const CostConstants& c) {
  CpComm cc;
  cc.cp = cp;
  cc.kind = e.recipe.cp_kind;
  if (cp <= 1) return cc;
  cc.block_bytes = kv_block_bytes(m, e, tp, cp);
  cc.block_attention_s = block_attention_s;
  cc.block_attention_backward_s = block_attention_backward_s;
  if (cc.kind == CpKind::AllGather) allgather_terms(cc, link, c);
  else ring_terms(cc, link, c);
  if (e.recompute == Recompute::Full) {  // the recomputed forward exchanges K and V again
    cc.backward_total_s += cc.forward_total_s;
    cc.backward_exposed_s += cc.forward_exposed_s;
  }
  return cc;
}

}  // namespace trident::plan
