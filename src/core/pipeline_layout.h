// Megatron-Core's --pipeline-model-parallel-layout: which pipeline chunk holds the embedding (E),
// which decoder layers (t), the multi-token-prediction modules (m) and the loss (L), chunks
// separated by '|' in Megatron's order (virtual stage, then pipeline rank: chunk c runs on stage
// c % pp), with X*N and (...)*N repeats and commas or spaces ignored (Megatron-Core's
// PipelineParallelLayerLayout.from_str). NVIDIA's DeepSeek-V3 recipe (Megatron-Bridge 26.04.01,
// data/published_runs R0091) runs "Et*4|(t*4|)*14tmL": 4 layers on each of 15 chunks, the last
// one layer with the MTP module and the loss, where the planner's even split would put 3 layers
// there besides the MTP module and the loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

struct PipelineLayout {
  std::string text;               // as given ("" when none: the planner's even split)
  std::vector<int64_t> decoders;  // decoder layers of each chunk
  std::vector<int64_t> mtp;       // MTP modules of each chunk
  std::vector<int64_t> embedding, loss;  // E and L of each chunk (1 where it is)
  bool first_is_embedding = false;  // the first chunk's first symbol is E (Megatron places it first)
  bool empty() const { return text.empty(); }
  int64_t chunks() const { return int64_t(decoders.size()); }
};

// Parses the text; a syntax problem (an unknown symbol, a repeat without a count, an unmatched
// parenthesis) is added to `problems` naming it, and the layout comes back empty.
PipelineLayout parse_pipeline_layout(const std::string& text, Problems& problems);

// The layout's shape against the run: pp x v chunks, the model's layers, E first in chunk 0, L in
// the last chunk, the model's MTP modules in the last chunk (where the planner costs them). Every
// problem is added under `code`.
void check_pipeline_layout(const PipelineLayout& layout, int64_t layers, int64_t mtp_layers, int64_t pp,
                           int64_t virtual_stages, const char* code, Problems& problems);

}  // namespace trident
