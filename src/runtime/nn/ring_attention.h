// RingAttention: causal self-attention of a context-parallel rank (see context_split.h for
// which tokens it holds).
//
// Forward: the rank packs its keys and values (one per kv head) and passes them round the cp
// ring; at step i it holds rank (r - i)'s block, posts the send of that block to r + 1 and the
// receive of the next from r - 1 before computing its queries against it, so the exchange runs
// behind the block's attention; the partial results merge by the online softmax, keeping the
// log-sum-exp per query row (the micro-batch keeps lse, never the probabilities). Backward: the
// blocks go round again; each rank adds its queries' contribution to the block's key and value
// gradients, which travel the ring with the block (sent after the step's compute, received
// behind the next step's) and arrive, after cp steps, complete at the rank that owns them.
// Each pair runs in pieces of query rows with the messages in flight polled between them (MPI
// progresses a transfer only inside its calls). Messages stay in the cp group's order on every
// rank, so no tags beyond the two kinds.
#pragma once

#include <cstdint>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/buffer_plan.h"
#include "runtime/nn/context_split.h"

namespace trident::nn {

class RingAttention {
 public:
  // B sequences, split.local() rows each; nh query heads and nkv kv heads of hd values.
  RingAttention(kernels::Kernels& k, comm::Communicator& cp, const ContextSplit& split, int64_t B, int64_t nh,
                int64_t nkv, int64_t hd, kernels::DType dt);

  // Floats of the lse one layer keeps per micro-batch ([B, nh, local rows]).
  size_t lse_floats() const { return size_t(B_ * nh_ * split_.local()); }
  // Ring buffers and block scratch (the planner's "KV blocks of ring buffers").
  size_t bytes() const { return plan_.bytes(); }

  // out [B, local, nh*hd] and lse from qkv [B, local, 3, nh, hd] (kv heads repeated per query head).
  // mask: a sliding window (by whole-sequence positions) and sinks, merged once per row after
  // the ring's blocks (the sink belongs to the whole row's softmax, not to a block's).
  void forward(const kernels::Tensor& out, float* lse, const kernels::Tensor& qkv,
               const kernels::Kernels::AttentionMask& mask = {});
  // dqkv overwritten (the key and value gradients of each kv head on its group's first head);
  // with sinks, fp32 dsinks[nh] += this rank's rows' share of their gradient.
  void backward(const kernels::Tensor& dqkv, const kernels::Tensor& dout, const kernels::Tensor& qkv,
                const kernels::Tensor& out, const float* lse, const kernels::Kernels::AttentionMask& mask = {},
                float* dsinks = nullptr);

  // Seconds spent waiting on the ring's messages (what the compute did not hide) and computing
  // the blocks, since the last reset.
  double exchange_seconds() const { return wait_s_; }
  double attention_seconds() const { return compute_s_; }
  int64_t blocks_sent() const { return sent_; }  // KV blocks and KV-gradient blocks
  void reset_times() { wait_s_ = compute_s_ = 0, sent_ = 0; }
  // Best of `reps` ring shifts of one KV block (every rank sends to the next and receives from
  // the previous at once): the wire time of one ring step, with nothing to hide it. Collective
  // over the cp group.
  double probe_block_seconds(int reps);

 private:
  void wait(comm::RequestPtr& r);
  kernels::Kernels::AttentionBlock block(int64_t source, int64_t window) const {
    return split_.block(source, B_, nh_, nkv_, hd_, window);
  }

  kernels::Kernels& k_;
  comm::Communicator& cp_;
  ContextSplit split_;
  int64_t B_, nh_, nkv_, hd_;
  BufferPlan plan_;
  kernels::Tensor kv_[2], dkv_[2], dkv_step_;  // blocks in flight, gradients in flight, this step's
  float* scratch_ = nullptr;
  double wait_s_ = 0, compute_s_ = 0;
  int64_t sent_ = 0;
};

}  // namespace trident::nn
