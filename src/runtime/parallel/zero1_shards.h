// ZeRO-1 of one model chunk: the gradients reduce-scattered after backward, each rank updating
// its slice, the updated slices all-gathered back.
//
// The flat layout is cut into spaces, each reduced over its own group: without expert
// parallelism one space, the whole buffer over dp (x cp); with it two, the dense ranges over
// dp x cp and the experts' ranges (ParamLayout::expert_ranges) over the expert-data-parallel
// group. A space packs its ranges one after another, pads to a multiple of its group's size and
// gives group rank r the r-th equal slice [lo, hi) of the packed order; where that slice lies
// in the flat layout are the rank's pieces (shard offsets: the spaces' slices one after
// another). Staging (the packed buffer and the slice) is the kernels' device memory, so a GPU's
// communicator (NCCL) is handed device memory only.
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
  Zero1Shards(std::vector<GroupRanges> spaces, kernels::Kernels& k);

  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t shard_floats() const { return shard_floats_; }
  // The one space's slice when it is the whole buffer (no expert ranges); else [0, 0).
  int64_t whole_lo() const;
  int64_t whole_hi() const;

  // Reduce-scatter: afterwards the rank's pieces of grads hold the sums over their groups.
  void reduce(float* grads);
  // Every rank receives the others' updated slices into the whole parameters.
  void gather_params(float* params);
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
  };
  // Calls f(flat begin, packed offset, floats) for each range's part inside packed [from, to).
  template <class F>
  static void walk(const Space& s, int64_t from, int64_t to, F&& f);
  void pack(Space& s, const float* flat);           // all ranges -> packed
  void unpack_all(Space& s, float* flat);           // packed -> all ranges
  kernels::Kernels& k_;
  std::vector<Space> spaces_;
  std::vector<ShardPiece> pieces_;
  int64_t shard_floats_ = 0;
};

}  // namespace trident::parallel
