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
  return 4 * kv_block_bytes(m, e, tp, cp);
}

CpComm cp_comm_per_layer(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t cp, const GroupLink& link,
                         double block_attention_s, double block_attention_backward_s, const CostConstants& c) {
  CpComm cc;
  cc.cp = cp;
  if (cp <= 1) return cc;
  cc.block_bytes = kv_block_bytes(m, e, tp, cp);
  cc.block_transfer_s = p2p_time_s(cc.block_bytes, link, c);
  cc.block_attention_s = block_attention_s;
  cc.block_attention_backward_s = block_attention_backward_s;
  cc.steps = cp - 1;
  const double steps = double(cc.steps);
  cc.forward_total_s = steps * cc.block_transfer_s;
  cc.forward_exposed_s = steps * std::max(0.0, cc.block_transfer_s - block_attention_s);
  // Backward passes the KV block and its gradient each step, behind that block's backward attention.
  cc.backward_total_s = 2 * cc.forward_total_s;
  cc.backward_exposed_s = steps * std::max(0.0, 2 * cc.block_transfer_s - block_attention_backward_s);
  if (e.recompute == Recompute::Full) {
    cc.backward_total_s += cc.forward_total_s;
    cc.backward_exposed_s += cc.forward_exposed_s;
  }
  return cc;
}

}  // namespace trident::plan
