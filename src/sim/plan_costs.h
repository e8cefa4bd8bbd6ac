// Fills the simulator's costs from the planner's cost model (src/plan), so simulator and planner
// time every action the same way and differ only where the simulation sees more (uneven stages,
// the real order of actions, messages queueing on a link, buckets against the last backwards).
//
// Symmetry: every DP replica and every TP rank of a stage runs the same program; the TP
// collectives use the TP group's link, the DP reduction the DP group's, each pipeline boundary
// the slowest link any replica uses across it. So one pipeline is simulated for the whole mesh.
#pragma once

#include <string>
#include <vector>

#include "core/mesh.h"
#include "core/run_spec.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "sim/sim_costs.h"

namespace trident::sim {

struct BoundaryLink {
  int64_t from_stage = 0, to_stage = 0;  // to = from + 1, or 0 for the interleaved wrap
  GroupLink link;                        // slowest over all replicas and TP ranks
  plan::PpComm message;                  // one message on that link (and the receiver's gather)
};

struct PlannedCosts {
  SimCosts costs;
  plan::Estimate estimate;             // the planner's own numbers for the same run
  std::vector<BoundaryLink> boundaries;
  int64_t micro_batches = 0;
  int64_t virtual_stages = 1;
};

// `run` must pass check_run (resolve_run does that).
// Without a cost table: the run's own (cost_table(run)). overhead_bytes: the memory overhead per
// GPU the estimate's memory adds (as plan and lint do), so simulate reports the same memory.
PlannedCosts costs_from_plan(const RunSpec& run, double overhead_bytes = 0);
PlannedCosts costs_from_plan(const RunSpec& run, const plan::CostConstants& constants, double overhead_bytes = 0);

}  // namespace trident::sim
