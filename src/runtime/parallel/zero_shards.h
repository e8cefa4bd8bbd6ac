// ZeRO-2 and ZeRO-3 (FSDP) of one model chunk over its data-parallel groups, unit by unit.
//
// Units are the layout's (nn::ParamLayout::units(): embeddings, each layer, final norm + head).
// The flat layout is covered by spaces, each reduced over its own group (as in ZeRO-1,
// zero1_shards.h): one space, the whole buffer over dp (x cp), without expert parallelism; with
// it the experts' ranges over the expert-data-parallel group and the rest over dp x cp, as
// Megatron's and DeepSpeed's MoE do. Each unit is cut where the spaces meet into segments (a MoE
// layer: its dense tensors, then its experts). A segment is cut into n equal pieces for its
// group of n (the last padded): group rank r owns piece r of every segment, stored one after
// another in its shard buffers (shard_floats() floats: the segments' padded sizes / n). The AdamW
// moments, the gradient shard and (ZeRO-3) the parameter shard all use these shard coordinates.
// A segment's collectives run on the unit buffer in place, so a segment followed by another in
// the same unit reads past its end (the surplus sums land in the padding and are dropped) and
// is gathered into a spill area behind the unit, then copied into place.
//
// Gradients (stage 2 and 3): the stage asks for a unit's gradient buffer when backward first
// writes it (unit_grads), a zeroed buffer of one unit from a small pool; when the grad-ready hook
// says the unit is final for this micro-batch (mark_ready), its reduce-scatter starts
// asynchronously, overlapping the rest of backward, and its result is added to the gradient
// shard when it completes (in launch order, so the sums are deterministic). A buffer is reused
// once its reduction is done: the pool holds the units being written plus at most kSpare in
// flight. So per rank the gradients take shard_floats() plus a few unit buffers, not the
// whole flat buffer; the price is one reduce-scatter per unit per micro-batch (DeepSpeed's
// stage 2 does the same). Exception: with a tied GPT embedding split across stages, the first
// stage's embedding unit and the last stage's head unit are "deferred": kept whole over the step,
// because the two copies' gradients must be summed before they are reduced (the trainer does
// that through grads_at), then reduce-scattered in finish().
//
// Weights (stage 3): the parameter shard is the only copy. unit_weights(u) gathers unit u whole
// (all-gather of the pieces) into a gather buffer, and prefetches the unit used next
// (asynchronous all-gather) in the order the same kind of pass used them the first time it ran
// (forward, backward, the split backward's input and weight passes). When a unit is asked for,
// every other gathered unit except the one being prefetched is freed; end_pass frees all, so
// every micro-batch's forward and backward gathers each unit again (reshard after forward, as
// ZeRO-3 does): at most 2 units are whole at a time, 2 m all-gathers of the chunk per step.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/param_layout.h"
#include "runtime/parallel/device_buffer.h"

namespace trident::parallel {

// One contiguous part of the flat layout a rank owns: flat [begin, end) sits at `shard` in the
// rank's shard buffers (the moments; under ZeRO-2/3 the gradients; under ZeRO-3 the weights).
struct ShardPiece {
  int64_t begin = 0, end = 0, shard = 0;
};

// Bytes of model states a rank allocated, by what they hold (what plan::stage_memory predicts as
// weights / gradients / optimizer / gathered weights), plus communication staging.
struct ModelStateBytes {
  double weights = 0;        // fp32 parameters: the stage's whole buffer, or the ZeRO-3 shard
  double gradients = 0;      // fp32 gradients: the whole buffer, or the ZeRO-2/3 shard + deferred units
  double grad_buffers = 0;   // ZeRO-2/3: peak of the unit gradient buffers being written or reduced
  double optimizer = 0;      // AdamW m and v
  double gathered = 0;       // ZeRO-3: peak of the units gathered whole at once
  double staging = 0;        // communication staging (ZeRO-1 padded copies, ZeRO-2 gather staging)
  double total() const { return weights + gradients + grad_buffers + optimizer + gathered + staging; }
};

enum class Pass { Forward = 0, Backward = 1, BackwardInput = 2, BackwardWeight = 3 };

// Flat ranges (ascending) whose gradients reduce over one group, and whose states shard over it.
struct GroupRanges {
  comm::Communicator* group;
  std::vector<nn::ParamLayout::Unit> ranges;
};

class ZeroShards : public nn::UnitStorage {
 public:
  // zero: 2 or 3. spaces: disjoint, together the whole flat layout.
  ZeroShards(const std::vector<GroupRanges>& spaces, const nn::ParamLayout& layout, int zero, kernels::Kernels& k);

  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t shard_floats() const { return shard_floats_; }
  float* grad_shard() { return grad_shard_.p; }
  float* param_shard() { return param_shard_.p; }  // ZeRO-3

  bool holds_grads() const override { return true; }
  bool holds_weights() const override { return zero_ >= 3; }
  float* unit_grads(int64_t unit) override;
  const float* unit_weights(int64_t unit) override;

  void start_step();  // zero the gradient shard and the deferred units
  // Every unit at or above flat offset `begin` is final for the running backward: reduce it.
  void mark_ready(int64_t begin);
  // The deferred unit's gradient of flat element `offset` (tied embedding sum), or null.
  float* deferred_grads(int64_t offset);
  // Waits for every reduction and reduces the deferred units: the gradient shard is complete.
  void finish();
  // ZeRO-2: every rank receives the others' updated pieces into the stage's whole parameters.
  void gather_params(float* params);

  // ZeRO-3 passes: the prefetch order, and freeing the gathered units at the end.
  void begin_pass(Pass p);
  void end_pass();

  // Whole buffer (host) from every rank's shard-coordinate buffer `shard` (device): a collective.
  std::vector<float> gather_to_host(const float* shard);
  // This rank's pieces of the whole host buffer `whole` into `shard` (device).
  void scatter_from_host(const float* whole, float* shard);

  void add_bytes(ModelStateBytes& b) const;
  // Counts since construction (tests: overlap and prefetch happen).
  struct Counts {
    int64_t reductions = 0;     // unit reduce-scatters started from mark_ready
    int64_t gathers = 0;        // units gathered on demand (blocking)
    int64_t prefetches = 0;     // units gathered ahead of use (asynchronous)
    int64_t prefetch_hits = 0;  // uses of a unit already gathered (or in flight) when asked for
  };
  const Counts& counts() const { return counts_; }
  double gather_wait_s() const { return gather_wait_s_; }  // seconds blocked on ZeRO-3 gathers
  size_t peak_grad_buffers() const { return peak_bufs_; }
  size_t peak_gathered_units() const { return peak_gathered_; }
  int64_t max_unit_floats() const { return max_span_; }  // a unit buffer's floats

  static constexpr int kSpare = 2;  // unit gradient buffers in flight beyond those being written

 private:
  // A unit's part reduced over one group: flat [begin, end) in pieces of `per`, this rank's at
  // `shard`; `spill`: where its ZeRO-3 gather lands in a gather buffer when not in place (-1).
  struct Segment {
    int64_t begin = 0, end = 0, per = 0, shard = 0, valid = 0, spill = -1;  // valid: this rank's piece
    comm::Communicator* group = nullptr;
    bool exact() const { return per * group->size() == end - begin; }
  };
  struct UnitInfo {
    int64_t begin = 0, end = 0, shard = 0;  // shard: the first segment's
    bool deferred = false;
    std::vector<Segment> segs;
  };
  struct Reduction {
    int buf = -1;
    int64_t unit = -1;
    std::vector<comm::RequestPtr> requests;  // one per segment
  };
  void add_unit(const nn::ParamLayout::Unit& u, const std::vector<GroupRanges>& spaces, bool deferred);
  std::vector<comm::RequestPtr> gather_unit(int64_t unit, float* into);
  void finish_gather(int64_t unit, bool place);  // waits for the unit's gather; copies spills into place
  void complete_oldest();
  int take_gather_buffer();

  kernels::Kernels& k_;
  int zero_;
  std::vector<UnitInfo> units_;
  std::vector<ShardPiece> pieces_;
  // Largest piece, segment padded (per x n), unit buffer (its segments' reach) and unit shard.
  int64_t shard_floats_ = 0, max_per_ = 0, max_padded_ = 0, max_span_ = 0, max_unit_shard_ = 0, max_gather_ = 0;
  DeviceBuffer grad_shard_, param_shard_;
  // Gradient unit buffers (padded unit size) and their reduce-scatter results (one piece).
  std::vector<DeviceBuffer> bufs_, recvs_;
  std::vector<int> free_bufs_;
  std::vector<int> active_;  // unit -> buffer being written (-1: none)
  int writing_ = 0;
  std::deque<Reduction> in_flight_;
  std::vector<DeviceBuffer> deferred_;  // unit -> whole buffer when deferred
  DeviceBuffer send_, gathered_;        // ZeRO-2 parameter gather staging (one piece, one unit)
  // ZeRO-3 gathered units.
  std::vector<DeviceBuffer> gbufs_;
  std::vector<int> free_gbufs_;
  std::vector<int> resident_;                 // unit -> gather buffer (-1: sharded)
  std::vector<std::vector<comm::RequestPtr>> prefetching_;  // unit -> all-gathers in flight
  int64_t current_ = -1;
  Pass pass_ = Pass::Forward;
  std::vector<int64_t> order_[4];  // units in the order of first use, per pass kind
  bool recording_ = false;
  size_t pos_ = 0;
  size_t peak_bufs_ = 0, peak_gathered_ = 0;
  Counts counts_;
  double gather_wait_s_ = 0;
};

}  // namespace trident::parallel
