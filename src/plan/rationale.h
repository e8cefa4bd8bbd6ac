// Rationale: explain a search winner in the source chapter's decision flow (fits with plain DP?
// TP inside NVLink? add PP? 3D past 32 GPUs?) with the numbers that decided each step, and say
// where the chapter's rules of thumb (8-GPU node: < 10B plain DP, 10-30B PP+DP, > 30B or < 40 GB
// add TP) would choose differently, and why.
#pragma once

#include <string>
#include <vector>

#include "plan/search.h"

namespace trident::plan {

std::vector<std::string> rationale(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                                   const SearchSpace& space, const Estimate& winner, double overhead_bytes,
                                   const CostConstants& c);
// With the winner's cost table.
std::vector<std::string> rationale(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                                   const SearchSpace& space, const Estimate& winner, double overhead_bytes);

// The same for the winner of `searched` (searched.best not empty), a search of this model,
// cluster, batch and overhead: the constrained searches are answered from its candidates.
std::vector<std::string> rationale(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                                   const SearchResult& searched, double overhead_bytes);

// A candidate in one line: "tp 8 x pp 8 x dp 64 (tp-dp-pp, b 3, interleaved v 12, ZeRO 1, ...)".
std::string short_layout(const Estimate& e);
// The (at most three) terms of the step that differ most, a less b: "DP -0.941 s, bubble +0.263 s".
std::string differences(const Estimate& a, const Estimate& b);

// What the rules of thumb pick for this model and GPU: "plain DP", "PP+DP" or "TP+PP+DP".
std::string rule_of_thumb(const ModelSpec& model, const ClusterSpec& cluster);

}  // namespace trident::plan
