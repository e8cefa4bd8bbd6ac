// When no layout fits: which rule rejected most candidates, and the smallest changes of the
// input that do fit, each found by planning again with that one change.
#pragma once

#include <string>
#include <vector>

#include "plan/search.h"

namespace trident::plan {

struct NoFitAdvice {
  std::string top_rule;              // the rule that rejected the most candidates
  int64_t top_count = 0;             // how many candidates it rejected
  int64_t rejected = 0;              // candidates rejected by any rule (not those pruned or dominated)
  std::vector<std::string> changes;  // "--global-batch-size 1536", each one change that fits
};

// `res` is the search that found nothing; the changes tried are the nearest global batch sizes,
// each dimension the user fixed left to the search, and more nodes (up to 8x).
NoFitAdvice advise_no_fit(const SearchResult& res, const ModelSpec& model, const ClusterSpec& cluster,
                          int64_t global_batch, const SearchSpace& space, double overhead_bytes,
                          const CostConstants& cost);

}  // namespace trident::plan
