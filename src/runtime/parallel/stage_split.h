// Which layers each pipeline stage (and each of its model chunks) runs, and the Shard a rank
// holds for a chunk. The split is the planner's (chunk_layers, core/chunk_layers.h), so the prediction and the
// run talk about the same stages; an explicit uneven split may replace it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/problems.h"
#include "runtime/nn/param_layout.h"

namespace trident::parallel {

struct StageSplit {
  int64_t pp = 1, virtual_stages = 1;
  // layers_of[k] for virtual stage k = chunk * pp + stage (Megatron's interleaving).
  std::vector<int64_t> layers_of;
  int64_t first_layer_of(int64_t virtual_stage) const;
};

// Even split (the planner's), or `explicit_layers` (one count per virtual stage) when not empty.
// Problems: capability::check_stage_split's, pp*v above layers.
StageSplit make_stage_split(const ModelSpec& model, int64_t pp, int64_t virtual_stages,
                            const std::vector<int64_t>& explicit_layers, Problems& problems);

// The shard pipeline stage `stage`, local chunk `chunk`, TP rank `tp_rank` of `tp` holds.
nn::Shard shard_for(const ModelSpec& model, const StageSplit& split, int64_t stage, int64_t chunk, int64_t tp,
                    int64_t tp_rank);

}  // namespace trident::parallel
