// What the simulator needs to time one pipeline's programs: per stage and chunk, the duration of
// each compute action (with the TP collectives it contains), the pipeline message time to the
// next stage, and the stage's data-parallel and optimizer work. Plain numbers, so tests can feed
// synthetic durations and plan_costs.h fills them from the planner's cost model.
#pragma once

#include <cstdint>
#include <vector>

namespace trident::sim {

struct ChunkCost {
  double forward_s = 0;      // one micro-batch through this chunk, TP collectives included
  double backward_s = 0;     // full backward (input + weight gradient, recomputation), TP included
  double weight_share = 0.5; // part of the backward compute that is weight gradient (ZB-H1 split)
  double tp_forward_s = 0;   // TP collectives inside forward_s (on the critical path)
  double tp_backward_s = 0;  // TP collectives inside backward_s; they belong to the input-gradient half
  // Context parallel: the part of the KV ring exchange not hidden behind attention; expert
  // parallel: the MoE dispatch and combine all-to-alls. Inside forward_s / backward_s like TP.
  double cp_forward_s = 0, cp_backward_s = 0;
  double ep_forward_s = 0, ep_backward_s = 0;
  // ZeRO-3 / FSDP: the per-layer weight all-gathers (and, backward, gradient reduce-scatters)
  // not hidden behind the chunk's layers, plus the slowdown of the hidden part. Inside too.
  double dp_forward_s = 0, dp_backward_s = 0;
  // The GPU's wait for the host to issue the chunk's kernels (plan/host_issue.h); inside too. The
  // backward's is split between the halves as its compute is (the host issues both halves' kernels).
  double host_forward_s = 0, host_backward_s = 0;
  double comm_backward_s() const { return tp_backward_s + cp_backward_s + ep_backward_s + dp_backward_s; }
  // Durations of the split halves: the collectives go with the input gradient.
  double backward_weight_s() const { return (backward_s - comm_backward_s()) * weight_share; }
  double backward_input_s() const { return backward_s - backward_weight_s(); }
};

struct StageCost {
  std::vector<ChunkCost> chunks;  // one per local chunk (v)
  // One message (activation forward or gradient backward) between this stage and the next one
  // (stage p-1's next is stage 0: interleaving wraps round). The same time in both directions.
  double p2p_s = 0;
  double dp_reduce_s = 0;       // gradient reduction across replicas; overlaps the last backwards
  double dp_reduce_each_backward_s = 0;  // ZeRO-2: a reduce-scatter after every micro-batch's backward
  int64_t dp_buckets = 1;       // it runs in this many equal buckets, each as soon as its layers are done
  // false: every bucket waits for the stage's last backward (--overlap without dp, or a stack that
  // reduces after the pipeline flush).
  bool dp_overlapped = true;
  double embedding_sync_s = 0;  // tied-embedding all-reduce between first and last stage (after backward)
  double optimizer_s = 0;
  double dp_after_optimizer_s = 0;  // ZeRO / distributed optimizer: all-gather of the updated weights
};

struct SimCosts {
  std::vector<StageCost> stages;  // one per pipeline stage
  // true: a stage stays in its send until the message is delivered (Megatron's blocking p2p);
  // false: sends run on a separate stream and only the receiver waits.
  bool blocking_sends = true;
};

// p stages, v chunks each, the same costs everywhere: for tests and closed-form checks.
SimCosts uniform_costs(int64_t stages, int64_t chunks, double forward_s, double backward_s, double p2p_s = 0);

}  // namespace trident::sim
