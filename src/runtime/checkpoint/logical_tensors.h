// Where a shard's tensors sit in the model's logical tensors.
//
// A checkpoint stores every tensor by its logical name ("wte", "layers.3.qkv_w") and its
// unsharded shape, whatever layout trained it. A rank's local tensor is one or more blocks of
// the logical one: a row range for wte (vocabulary slice), fc_w and fc_b; three row ranges for
// qkv_w / qkv_b (this rank's heads of q, of k and of v); a column range for attn_proj_w and
// fc_proj_w; the whole tensor for what tensor parallelism replicates. The last pipeline stage's
// copy of the tied embedding ("head_wte") is a view of "wte".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/nn/param_layout.h"

namespace trident::checkpoint {

// rows x cols elements: local [local_row, local_col] <-> logical [row, col].
struct Block {
  int64_t local_row = 0, local_col = 0;
  int64_t row = 0, col = 0;
  int64_t rows = 0, cols = 0;
};

struct LogicalSlice {
  std::string name;                 // logical name
  int64_t rows = 0, cols = 0;       // logical (unsharded) shape
  std::vector<Block> blocks;        // what the local tensor holds of it
  bool primary = true;              // false for copies another rank (or tensor) also holds:
                                    // TP-replicated tensors on tp rank > 0, the head's wte copy
};

LogicalSlice logical_slice(const nn::Shard& shard, const nn::TensorView& view);

class CheckpointReader;
// The flat host image (layout.total() floats, alignment gaps zero) of a shard's tensors read
// from a checkpoint: prefix "" for the parameters, "optimizer.m." / "optimizer.v." for the
// AdamW moments. Throws InputError when a tensor is missing or has another shape.
std::vector<float> read_shard(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix);

}  // namespace trident::checkpoint
