// Where a shard's tensors sit in the model's logical tensors.
//
// A checkpoint stores every tensor by its logical name ("wte", "layers.3.qkv_w") and its
// unsharded shape, whatever layout trained it. A rank's local tensor is one or more blocks of
// the logical one (ParamLayout::global_index places each row): a row range for wte and head_w
// (the token rows of its vocabulary slice; the padding rows are not stored and read back as
// zero), fc_w, fc_b and Llama's q_w; three row ranges for qkv_w / qkv_b (this rank's
// heads of q, of k and of v); two for Llama's kv_w (its keys, its values) and gate_up_w (its
// gate slice, its up slice); a column range for attn_proj_w and fc_proj_w; the whole tensor for
// what tensor parallelism replicates. The last pipeline stage's copy of GPT's tied embedding
// ("head_wte") is a view of "wte". A tensor several TP ranks hold (norms; Llama's kv_w when tp
// exceeds the kv heads) is written by its primary rank only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"
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
                                    // TP replicas off their primary rank, the head's wte copy
};

LogicalSlice logical_slice(const nn::Shard& shard, const nn::TensorView& view);

class CheckpointReader;

// THE check of a checkpoint's meta against its tensors, shared by every reader (generate,
// export, resume): the model the meta describes has each of its tensors stored, in the shape
// that model gives it (the AdamW moments too, when stored), and the checkpoint holds no tensor
// it lacks (a layer more). A meta edited by hand (kv-heads 4 over tensors of 2, another ffn,
// hidden, vocabulary, sequence length or layer count) is a problem per tensor, never a read
// past the stored data. check_model_tensors adds the problems; checked_model reads the meta's
// model, checks it and throws InputError listing them all.
void check_model_tensors(const CheckpointReader& reader, const ModelSpec& model, Problems& problems);
ModelSpec checked_model(const CheckpointReader& reader);

// The flat host image (layout.total() floats, alignment gaps zero) of a shard's tensors read
// from a checkpoint: prefix "" for the parameters, "optimizer.m." / "optimizer.v." for the
// AdamW moments. Throws InputError when a tensor is missing or has another shape.
std::vector<float> read_shard(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix);
// The same into `image` (layout.total() floats, e.g. the trainer's own buffer): zeroed, then
// each block read straight into place, no copy of the shard in between.
void read_shard_into(const CheckpointReader& reader, const nn::ParamLayout& layout, const std::string& prefix,
                     float* image);

}  // namespace trident::checkpoint
