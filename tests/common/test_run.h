// The run the planner and simulator unit tests start from: `model` on `nodes` nodes of the
// `cluster` preset, tp x pp x dp in `order`; each test sets the rest (batch, schedule, recipe).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/run_spec.h"

namespace trident::tests {

inline RunSpec run_on(const ModelSpec& model, const std::string& cluster, int64_t nodes, int64_t tp, int64_t pp,
                      int64_t dp, const std::string& order) {
  RunSpec run;
  run.model = model;
  run.cluster = cluster_preset(cluster);
  run.cluster.nodes = nodes;
  run.layout.tp = tp;
  run.layout.pp = pp;
  run.layout.dp = dp;
  run.layout.order = order;
  return run;
}

// The planner's options (model, cluster, layout, execution, cost) set as flags would set them:
// what resolve_execution and the run readers take in the option tests.
inline OptionValues planner_values(const std::vector<std::pair<std::string, std::string>>& kv) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options()}));
  for (const auto& [k, x] : kv) v.set(k, x, "--" + k);
  return v;
}

}  // namespace trident::tests
