// ZeRO-1 of one model chunk: the gradients reduce-scattered bucket by bucket as backward
// finishes them (Megatron's distributed optimizer with overlap_grad_reduce), each rank updating
// its slices, the updated slices all-gathered back after the step.
//
// The weight all-gathers overlap the next forward (overlap_param_gather): start_gather() starts
// every bucket's after the optimizer step, and a bucket's is completed (finish_gather) just
// before forward first reads its weights.
//
// Each gradient bucket (GradSync's, cut at layer boundaries) is cut into spaces, each reduced
// over its own group: without expert parallelism one, the bucket over dp (x cp); with it two,
// the bucket's dense ranges over dp x cp and its experts' ranges (ParamLayout::expert_ranges)
// over the expert-data-parallel group. A space packs its ranges one after another, pads to a
// multiple of its group's size and gives group rank r the r-th equal slice [lo, hi) of the
// packed order; where the slices lie in the flat layout are the rank's pieces (shard offsets:
// the spaces' slices one after another). Staging (the packed buffer and the slice) is the
// kernels' device memory, so a GPU's communicator (NCCL) is handed device memory only.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/param_layout.h"
#include "runtime/parallel/device_buffer.h"
#include "runtime/parallel/zero_shards.h"

namespace trident::parallel {

class Zero1Shards {
 public:
  // buckets[i]: bucket i's spaces.
  Zero1Shards(std::vector<std::vector<GroupRanges>> buckets, kernels::Kernels& k);
  // Waits for the collectives still in flight (a weight all-gather started after the last
  // step): MPI would otherwise go on reading and writing the staging buffers freed here.
  ~Zero1Shards();
  Zero1Shards(const Zero1Shards&) = delete;
  Zero1Shards& operator=(const Zero1Shards&) = delete;

  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t shard_floats() const { return shard_floats_; }

  // Bucket i's gradients are final: pack them and start its reduce-scatters.
  void start(size_t bucket, const float* grads);
  // Lets the bucket's started reductions progress (MPI moves data only inside MPI calls).
  void progress(size_t bucket);
  // Starts what is left and waits: afterwards the rank's pieces of grads hold the sums over
  // their groups.
  void reduce(float* grads);
  // Every rank receives the others' updated slices into the whole parameters.
  void gather_params(float* params);
  // The same in two halves: every bucket's all-gather started (in bucket order, as every rank
  // starts them), then bucket b's completed into params. finish_gather returns false when
  // bucket b had none in flight.
  void start_gather(const float* params);
  bool finish_gather(size_t bucket, float* params);
  bool gathering() const { return gathers_in_flight_ > 0; }
  // Whole buffer (host) from every rank's shard-coordinate buffer `shard` (a collective), and back.
  std::vector<float> gather_to_host(const float* shard, int64_t total);
  void scatter_from_host(const float* whole, float* shard);
  void add_bytes(ModelStateBytes& b) const;

 private:
  struct Space {
    comm::Communicator* group;
    std::vector<nn::ParamLayout::Unit> ranges;
    int64_t size = 0, per = 0, lo = 0, hi = 0, shard = 0;  // packed floats, slice, its shard offset
    DeviceBuffer packed, slice;
    comm::RequestPtr reduction;  // started this step, not yet copied back
    comm::RequestPtr gather;     // the weights' all-gather, started, not yet unpacked
  };
  // Calls f(flat begin, packed offset, floats) for each range's part inside packed [from, to).
  template <class F>
  static void walk(const Space& s, int64_t from, int64_t to, F&& f);
  static bool alone(const Space& s) { return s.group->size() == 1; }
  void pack(Space& s, const float* flat);           // all ranges -> packed
  void unpack_all(Space& s, float* flat);           // packed -> all ranges
  kernels::Kernels& k_;
  std::vector<Space> spaces_;  // bucket by bucket
  std::vector<size_t> first_;  // bucket b's spaces: spaces_[first_[b] .. first_[b + 1])
  std::vector<ShardPiece> pieces_;
  int64_t shard_floats_ = 0;
  int64_t gathers_in_flight_ = 0;
};

}  // namespace trident::parallel
