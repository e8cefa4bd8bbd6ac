// Search: enumerate every valid layout of a model on a cluster (tp, pp, cp, dp, ep, micro-batch size,
// schedule and v, ZeRO stage, recomputation, sequence parallel, order), reject the infeasible
// with a counted reason, rank the rest by predicted throughput and keep the best K.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/execution_spec.h"
#include "core/model_spec.h"
#include "plan/estimate.h"

namespace trident::plan {

// Dimensions the user fixed; everything left empty is searched.
struct SearchSpace {
  // The size of each parallel dimension (by Dim: TP, CP, DP, PP, EP, ETP), fixed or unset when
  // searched (EDP and DCP, groups, stay unset).
  std::array<std::optional<int64_t>, 8> sizes;
  std::optional<int64_t> micro_batch, virtual_stages;
  std::optional<ScheduleKind> schedule;
  // The schedules the stack (or the launch --emit writes) runs; empty: every schedule.
  std::vector<ScheduleKind> stack_schedules;
  std::optional<int> zero;
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel;
  std::optional<std::string> order;
  // The settings every candidate starts from: the stack's (precision, gradient bits, attention,
  // overlap, its name, ...), not searched; the searched fields above replace theirs.
  ExecutionSpec settings;
  int64_t max_micro_batch = 16;
  // cp > 1 is searched only while each cp rank keeps this many tokens of a sequence: shorter
  // blocks cannot hide the ring exchange, and shorter sequences fit without cp.
  int64_t min_tokens_per_cp_rank = 4096;
  // Speed-ups that do not change the result (the benchmark turns them off to show what they save):
  bool prune_dominated = true;  // skip gpipe (1f1b is as fast with less memory) and sequence parallel off
  bool dedupe_orders = true;    // evaluate one order per distinct mapping of groups onto links
  // Skip a recipe whose step-time bound (step_time_lower_bound) cannot beat the best at its tp and
  // pp (with cp 1 or above, ep 1 or above) nor the last of the best `top`: those bests and the
  // best `top` stay what a full search gives (best_per_shape's entry for one cp or ep above 1 may not).
  bool prune_by_bound = true;

  // The stack's settings of `exec` (everything the search does not search), and its ZeRO stage
  // when the stack has no other.
  void use_stack(const ExecutionSpec& exec);
  // Every dimension of `layout` fixed (tp, pp, dp, cp, ep, order); the rest stays searched.
  void fix_layout(const Layout& layout);
  // The size of a dimension (TP, PP, DP, CP, EP or ETP): fixed, or unset when searched.
  std::optional<int64_t>& size(Dim d) { return sizes.at(size_t(d)); }
  const std::optional<int64_t>& size(Dim d) const { return sizes.at(size_t(d)); }
};

struct SearchResult {
  std::vector<Estimate> best;                 // best first, at most `top`
  int64_t enumerated = 0;                     // combinations considered
  int64_t estimated = 0;                      // combinations fully estimated
  int64_t feasible = 0;                       // fit in memory
  std::map<std::string, int64_t> rejected;    // reason -> how many combinations
  int64_t duplicate_orders = 0;               // orders that map every group to the same links as another
  double seconds = 0;                         // wall time of the search
  // The best candidate of each shape (tp, pp, cp, ep) estimated, and the space searched: the
  // rationale's questions ("the best layout with tp 1 and pp 1") are answered from them
  // (best_within) instead of searching again.
  std::map<std::array<int64_t, 4>, Estimate> best_per_shape;
  SearchSpace space;
};

// The ranking: more tokens per second, then less memory on the most loaded GPU.
bool better_estimate(const Estimate& a, const Estimate& b);

// What search(..., narrower, top 1, ...) would return first, from a search over a wider space of
// the same model, cluster, batch, overhead and cost: `narrower` may fix more of tp, pp, cp and ep
// than searched.space did (cp and ep above 1 only where the search did not prune by its bound) and must
// equal it otherwise. Empty outer optional when it cannot tell (narrower is not inside the space
// searched); inner empty when no layout fits.
std::optional<std::optional<Estimate>> best_within(const SearchResult& searched, const SearchSpace& narrower);

// Whether tp splits the model's heads, key/value heads and MLP widths evenly.
bool tp_divides_model(const ModelSpec& model, int64_t tp);

SearchResult search(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                    const SearchSpace& space, int top, double overhead_bytes);  // built-in table of the GPU
SearchResult search(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                    const SearchSpace& space, int top, double overhead_bytes, const CostConstants& c);

}  // namespace trident::plan
