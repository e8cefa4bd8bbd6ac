// The even split of a model's layers over pipeline chunks: one pure formula shared by the planner
// (plan/cost_model.h, every cost and memory term) and the trainer's stage split
// (runtime/parallel/stage_split.h), so the runtime splits as the prediction does without linking plan.
#pragma once

#include <cstdint>
#include <vector>

namespace trident {

// Layers of each pipeline chunk. chunk c = stage (c % pp) for virtual chunk (c / pp). Even when
// layers % (pp*v) == 0; otherwise the remainder goes one each to chunks 1, 2, ... (the first and
// last chunks keep the base count because they also hold the embedding and the logits).
std::vector<int64_t> chunk_layers(int64_t layers, int64_t pp, int64_t virtual_stages);

}  // namespace trident
