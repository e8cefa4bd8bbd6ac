// Data-parallel gradient synchronisation of one flat gradient buffer (one model chunk).
//
// Plain DP: the buffer is cut into buckets at layer boundaries (>= bucket_floats each, counted
// from the end, since backward finishes the head first and the embedding last). As backward
// reports finished ranges (mark_ready), every bucket lying wholly above the lowest finished
// offset starts its all-reduce at once, overlapping the rest of backward; finish() waits for
// what is still in flight (the "exposed" DP time) — replicas are summed, not averaged, because
// each token's loss is already weighted by 1 / (tokens in the global batch).
//
// ZeRO-1: Zero1Shards (zero1_shards.h) reduce-scatters the same buckets as they become final,
// overlapping backward as plain DP does (the experts' ranges over EDP, the rest over dp); each
// rank updates only its slice of each bucket (optimizer state of that size), and
// all_gather_params() brings every rank the updated parameters.
//
// ZeRO-2 / ZeRO-3: ZeroShards (zero_shards.h) holds the gradients (and weights) unit by unit as
// the stage's UnitStorage; GradSync forwards the hook, finish and gathers to it. Whatever the
// stage, pieces() says which parts of the flat layout this rank updates and where their
// moments sit (one piece [0, total) without sharding, the ZeRO-1 slice, or one piece per unit).
//
// Expert parallel: the experts' ranges (ParamLayout::expert_ranges) differ between the dp ranks
// of an EP group, so a bucket's all-reduce skips them over dp and reduces them over the expert
// group (EDP) instead; ZeRO-1, 2 and 3 shard them over EDP (the same spaces: spaces()).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/param_layout.h"
#include "runtime/parallel/device_buffer.h"
#include "runtime/parallel/zero1_shards.h"
#include "runtime/parallel/zero_shards.h"

namespace trident::parallel {

class GradSync {
 public:
  // experts: the EDP group of an expert-parallel run (null without expert parallelism).
  GradSync(comm::Communicator& dp, const nn::ParamLayout& layout, int zero, int64_t bucket_floats,
           kernels::Kernels& k, comm::Communicator* experts = nullptr);

  bool sharded() const { return zero_ >= 1 && dp_.size() > 1; }
  int stage() const { return sharded() ? zero_ : 0; }  // the ZeRO stage in effect (0 when dp is 1)
  // What this rank updates: flat ranges and their place in the shard buffers (moments).
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t shard_floats() const { return shard_floats_; }
  // ZeRO-2/3: the stage's unit storage (null otherwise).
  ZeroShards* units() { return units_.get(); }
  // Where the optimizer finds a piece's gradients and weights (the stage's whole buffers, or
  // the shards), and a gradient by flat offset for the tied-embedding sum (the stage's buffer,
  // or a deferred unit's).
  float* piece_grads(float* stage_grads, const ShardPiece& p);
  float* piece_params(float* stage_params, const ShardPiece& p);
  float* grads_at(float* stage_grads, int64_t offset);
  size_t bucket_count() const { return buckets_.size(); }
  // Buckets whose reduction has started this step (tests: overlap with backward).
  size_t launched_buckets() const;

  void start_step();  // forget last step's launches
  // Buckets overlapping [begin, end) start only in finish(): ZeRO-1's tied-embedding gradient,
  // summed between the first and last stage after backward and before the reduce-scatter.
  void hold_until_finish(int64_t begin, int64_t end);
  // Gradients of [begin, end) are final for this step (called from inside backward).
  void mark_ready(float* grads, int64_t begin, int64_t end);
  // Launches what is left and waits for every reduction. Afterwards (plain DP) the whole buffer
  // holds the sum over replicas, or (ZeRO-1) the rank's pieces do.
  void finish(float* grads);
  // ZeRO-1: every rank receives the others' updated slices.
  void all_gather_params(float* params);
  // The same overlapping the next forward (Megatron's overlap_param_gather): start_param_gather()
  // starts every bucket's all-gather after the optimizer step; wait_params() completes those of
  // the buckets overlapping [begin, end) (forward calls it before reading those weights) and
  // returns the buckets' flat ranges (to refresh a compute copy); complete_params() completes
  // the rest. Seconds blocked in them: param_wait_s(). No-ops but under ZeRO-1.
  void start_param_gather(float* params);
  std::vector<nn::ParamLayout::Unit> wait_params(float* params, int64_t begin, int64_t end);
  std::vector<nn::ParamLayout::Unit> complete_params(float* params);
  bool gathering_params() const { return zero1_ && zero1_->gathering(); }
  double param_wait_s() const { return param_wait_s_; }
  // Host copy of a whole buffer of this layout of which this rank holds its pieces at `owned`
  // (shard coordinates, device memory; e.g. an AdamW moment): gathered over DP under ZeRO-1 (a
  // collective: every DP rank calls it), copied as it is otherwise.
  std::vector<float> gather_to_host(const float* owned);
  // Whether `owned` buffers (the moments) hold the whole flat layout: no ZeRO sharding.
  bool holds_whole() const { return !units_ && !zero1_; }
  // The reverse: this rank's part of a whole host buffer into `owned` (shard coordinates).
  void scatter_from_host(const float* whole, float* owned);
  // Bytes of the model states this sync holds (shards, unit buffers, staging); adds them to b.
  void add_bytes(ModelStateBytes& b) const;

 private:
  struct Bucket {
    int64_t begin, end;
    std::vector<comm::RequestPtr> requests;  // one per dense or expert part
    bool launched = false;
    bool held = false;  // starts only in finish()
  };
  void advance(float* grads, bool finishing);
  void launch(size_t bucket, float* grads);
  std::vector<GroupRanges> spaces(int64_t begin, int64_t end) const;
  comm::Communicator& dp_;
  comm::Communicator* experts_ = nullptr;
  std::vector<nn::ParamLayout::Unit> expert_ranges_;  // only with experts_
  kernels::Kernels& k_;
  int zero_;
  int64_t total_;
  std::vector<Bucket> buckets_;  // ascending offsets
  int64_t ready_from_;           // lowest offset whose gradients are final
  std::unique_ptr<Zero1Shards> zero1_;
  std::vector<ShardPiece> pieces_;
  int64_t shard_floats_ = 0;
  double param_wait_s_ = 0;
  std::unique_ptr<ZeroShards> units_;
};

}  // namespace trident::parallel
