#include "plan/no_fit.h"

#include <fmt/format.h>

#include "core/dimensions.h"

namespace trident::plan {

namespace {

bool fits(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch, const SearchSpace& space,
          double overhead, const CostConstants& cost) {
  return !search(model, cluster, global_batch, space, 1, overhead, cost).best.empty();
}

// The nearest global batch sizes with a layout, below and above (at most `tries` searches).
std::vector<std::string> batch_changes(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                                       const SearchSpace& space, double overhead, const CostConstants& cost) {
  constexpr int kTries = 48;
  std::vector<std::string> out;
  bool below = false, above = false;
  for (int64_t d = 1, tried = 0; tried < kTries && d < global_batch && !(below && above); ++d) {
    for (int64_t g : {global_batch - d, global_batch + d}) {
      bool& done = g < global_batch ? below : above;
      if (done || g <= 0 || (space.micro_batch && g % *space.micro_batch != 0)) continue;
      ++tried;
      if (!fits(model, cluster, g, space, overhead, cost)) continue;
      done = true;
      out.push_back(fmt::format("--global-batch-size {}", g));
    }
  }
  return out;
}

}  // namespace

NoFitAdvice advise_no_fit(const SearchResult& res, const ModelSpec& model, const ClusterSpec& cluster,
                          int64_t global_batch, const SearchSpace& space, double overhead, const CostConstants& cost) {
  NoFitAdvice a;
  for (const auto& [reason, n] : res.rejected) {
    // Candidates pruned as pointless or dominated were not refused by a rule: they do not count.
    if (reason.rfind("pruned:", 0) == 0 || reason.rfind("dominated:", 0) == 0) continue;
    a.rejected += n;
    if (n > a.top_count) a.top_count = n, a.top_rule = reason;
  }
  if (global_batch <= 0) return a;
  a.changes = batch_changes(model, cluster, global_batch, space, overhead, cost);
  // Each fixed dimension left to the search: with --dp 7 fixed, "without --dp" may fit.
  auto freed = [&](const char* flag, auto member) {
    if (!(space.*member)) return;
    SearchSpace s = space;
    s.*member = std::nullopt;
    if (fits(model, cluster, global_batch, s, overhead, cost))
      a.changes.push_back(fmt::format("leave --{} out (the search picks it)", flag));
  };
  for (const Dimension& d : dimensions())
    if (space.size(d.dim)) {
      SearchSpace s = space;
      s.size(d.dim) = std::nullopt;
      if (fits(model, cluster, global_batch, s, overhead, cost))
        a.changes.push_back(fmt::format("leave --{} out (the search picks it)", d.name));
    }
  freed("micro-batch-size", &SearchSpace::micro_batch);
  freed("zero", &SearchSpace::zero);
  freed("recompute", &SearchSpace::recompute);
  freed("schedule", &SearchSpace::schedule);
  freed("virtual-stages", &SearchSpace::virtual_stages);
  // More nodes, when the layout is not pinned to the world size by a fixed dp.
  for (int64_t factor : {2, 4, 8}) {
    ClusterSpec c = cluster;
    c.nodes = cluster.nodes * factor;
    if (fits(model, c, global_batch, space, overhead, cost)) {
      a.changes.push_back(fmt::format("--nodes {}", c.nodes));
      break;
    }
  }
  return a;
}

}  // namespace trident::plan
