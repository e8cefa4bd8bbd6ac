// Megatron's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split:
// the embedding (loss) counts as one layer when the layers are split over the pipeline chunks, so
// the first (last) chunk holds one layer less, and layers + units must divide over pp x v chunks.
// One place for the count, read by the layout rule, the search and the Megatron launch.
#pragma once

#include <cstdint>

#include "core/execution_spec.h"

namespace trident {

// The pipeline units besides the layers: 0, 1 or 2.
inline int64_t pipeline_split_extra_units(const ExecutionSpec& e) {
  return (e.embedding_in_pipeline_split ? 1 : 0) + (e.loss_in_pipeline_split ? 1 : 0);
}

}  // namespace trident
