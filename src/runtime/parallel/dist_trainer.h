// DistTrainer: one rank's part of a dp x tp x pp training run.
//
// It owns the rank's model chunks (GptStage, one per virtual stage it holds), runs the
// pipeline schedule's action list for its stage (schedule/), places the pipeline sends and
// receives, the data-parallel gradient reduction (bucketed, overlapped, or ZeRO-1), the tied
// embedding's gradient sum between first and last stage, global-norm clipping, and AdamW.
// TP collectives are inside GptStage (the TP communicator is handed to it).
//
// Every step it records where this rank's time went (PhaseTimes) for the rehearsal report.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/phase_times.h"
#include "core/run_spec.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/zero_shards.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/stage_split.h"
#include "runtime/engine/optimizer.h"
#include "runtime/kernels/ops.h"

namespace trident::nn {
class GptStage;
}

namespace trident::parallel {

struct TrainerOptions {
  engine::AdamWConfig adamw;
  uint64_t seed = 1337;
  int64_t bucket_floats = 1 << 20;         // DP bucket size (4 MiB of fp32)
  std::vector<int64_t> stage_layers;       // explicit uneven split (per virtual stage); empty = even
  int kernel_threads = 1;                  // threads of the CPU kernels the trainer makes itself
  kernels::Kernels* kernels = nullptr;     // the device's kernels (not owned); null = CPU kernels
  kernels::DType compute = kernels::DType::F32;  // the model's compute dtype (BF16: mixed precision)
  nn::MoeOptions moe;                      // router settings of MoE models (the capacity factor is the model's)
  // Fault injection for the tests (a slow GPU): each compute phase of this rank takes this many
  // times as long (it sleeps (x - 1) x the phase after it, timed as compute). 1 in real runs.
  double compute_slowdown = 1;
  // Multi-token prediction (ModelSpec::mtp_layers): the weight of the depths' mean losses in the
  // objective, divided by their number (Megatron's --mtp-loss-scaling-factor).
  double mtp_loss_scaling = 0.1;
};

// Activation memory of this rank: the micro-batch slots its schedule keeps in flight (each one
// allocation, its bytes from the stage's buffer plan) and the layer scratch they share.
struct ActivationMemory {
  int64_t slots = 0;           // over all chunks
  double slot_bytes = 0;       // all slots together
  double scratch_bytes = 0;  // all chunks' layer scratch (GptStage::layer_scratch_bytes)
  double total() const { return slot_bytes + scratch_bytes; }
};

// Routing of the mixture-of-experts layers over one step's global batch, the same on every rank
// (each token counted on the rank that routed it, summed over the world). Empty for a dense model.
struct RoutingStats {
  std::vector<int64_t> layers;                           // the model's MoE layers (global index)
  std::vector<std::vector<int64_t>> tokens_per_expert;   // [layer][expert] assignments routed, before dropping
  std::vector<int64_t> dropped;                          // [layer] assignments dropped at the capacity
  // [layer] the dropped assignments' identity: the sum of a 32-bit hash of each one's place in
  // the global batch (sequence, position, choice), so two runs that drop other assignments differ.
  std::vector<int64_t> dropped_ids;
  // [layer] the smallest gap, over the step's tokens, between a token's k-th and (k+1)-th router
  // score: below the rounding of another layout's sums (about 1e-7), that layout may route the
  // token to the other expert.
  std::vector<double> closest_tie;
  // Expert parallel: over the step's dispatches (each MoE layer of each micro-batch, on every ep
  // group), the rows the most loaded ep rank received summed, over the mean rank's summed: what
  // the planner's --moe-load-imbalance assumes (1 = balanced; 0 at ep 1).
  double ep_load_imbalance = 0;
  bool empty() const { return layers.empty(); }
};

class DistTrainer {
 public:
  DistTrainer(const RunSpec& run, ProcessGroups& groups, const BatchSource& data, const TrainerOptions& options);
  ~DistTrainer();

  // One optimizer step (0-based); returns the mean loss over the global batch (same on every rank).
  double step(int64_t step);
  // Mean loss over `batches` micro-batches of `data` (step 0's sequences), forward only; the
  // same value on every rank. Micro-batches are spread over the DP replicas.
  double evaluate(const BatchSource& data, int64_t batches);
  const PhaseTimes& last_times() const { return times_; }
  // The last step's routing (a collective was run inside step(); this only reads its result).
  const RoutingStats& routing_stats() const { return routing_; }
  double last_grad_norm() const { return grad_norm_; }
  // Multi-token prediction: the last step's mean loss of each depth (over the rows with a
  // target), the same on every rank; empty without MTP. step() returns the main loss only.
  const std::vector<double>& mtp_losses() const { return mtp_losses_; }
  // DeepSeek-V3's expert bias (the model's router_expert_bias; empty without): [MoE layer, in the
  // model's order][expert], no parameter: moved after each step by update_expert_bias from the
  // step's load over every rank, so the same on every rank. Checkpoints save and load it.
  const std::vector<std::vector<float>>& expert_bias() const { return expert_bias_; }
  // Sets its values (the same shape; a checkpoint's).
  void set_expert_bias(const std::vector<std::vector<float>>& bias);

  // Bytes this rank allocated for parameters, gradients, optimizer state, activations and buffers.
  double allocated_bytes() const;
  // Of them, the model states (weights, gradients, moments, ZeRO buffers), by kind.
  ModelStateBytes model_state_bytes() const;
  int zero_stage() const;  // the ZeRO stage in effect (0 when dp is 1)
  // What the chunk's ZeRO-2/3 units did so far: reductions, gathers on demand, prefetches
  // (all zero below ZeRO-2).
  ZeroShards::Counts zero_counts(int64_t chunk) const;
  // Peak activation memory of this rank (what plan::stage_memory predicts as activations_bytes).
  ActivationMemory activation_memory() const;
  double activation_bytes() const { return activation_memory().total(); }
  // Seconds one pipeline message of this run's size takes on the wire (measured at start-up).
  double pp_message_s() const { return pp_message_s_; }
  // Context parallel: seconds one KV block takes round the ring (measured at start-up, the
  // slowest rank's), and the KV and KV-gradient blocks this rank sent in the last step.
  double cp_block_s() const { return cp_block_s_; }
  // Expert parallel: how far apart the EP ranks' clocks may still be after aligning them at
  // start-up (0 at ep 1). Each step's all-to-alls are split on that clock into their own time
  // and PhaseTimes::ep_wait, the waiting for later peers.
  double ep_clock_error_s() const { return ep_clock_error_s_; }
  int64_t cp_blocks_per_step() const { return cp_blocks_; }

  // The chunks this rank holds (for tests comparing parameters).
  int64_t chunks() const;
  const nn::ParamLayout& chunk_layout(int64_t chunk) const;
  // The stage's whole fp32 parameters (device); null under ZeRO-3 (use whole_params).
  const float* chunk_params(int64_t chunk) const;
  nn::GptStage& chunk_stage(int64_t chunk);
  // Checkpoints read and write the chunks' parameters and optimizer state through these: host
  // copies over the chunk's whole flat layout, gathered over DP where they are sharded (ZeRO-1
  // and up for the moments, which: 0 = m, 1 = v; ZeRO-3 for the parameters): collectives,
  // every DP rank calls them. set_* take a whole buffer and keep this rank's part.
  std::vector<float> whole_moment(int64_t chunk, int which);
  std::vector<float> whole_params(int64_t chunk);
  // The same whole parameters (which -1) or moment (0 = m, 1 = v) where this rank already holds
  // them so in host memory (CPU kernels, not sharded by ZeRO): a pointer into the trainer's own
  // buffer, no copy and no collective (a save writes from it). Null otherwise: use whole_*.
  // A load may write there (then, for the parameters, chunk_stage(c).params_updated()).
  float* host_whole(int64_t chunk, int which);
  void set_whole_moment(int64_t chunk, int which, const float* whole);
  void set_whole_params(int64_t chunk, const float* whole);
  kernels::Kernels& kernels();
  const StageSplit& split() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  PhaseTimes times_;
  RoutingStats routing_;
  std::vector<double> mtp_losses_;
  std::vector<std::vector<float>> expert_bias_;  // the stages read it through pointers: resized only at construction
  double grad_norm_ = 0;
  double pp_message_s_ = 0;
  double cp_block_s_ = 0;
  double ep_clock_error_s_ = 0;
  int64_t cp_blocks_ = 0;
};

}  // namespace trident::parallel
