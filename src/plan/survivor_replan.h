// Replan for the GPUs that are left (`trident replan`): the best layout of the same model and
// recipe on the surviving nodes, found by the layout search, under a stated global-batch policy:
//   keep:  the same global batch (same tokens per step, same data order), more accumulation;
//   scale: the global batch scaled by the nodes left (B' = floor(B x nodes left / nodes), lowered
//          until a layout fits), the learning rate scaled by a named rule:
//          (both policies try each count of nodes from all the survivors down, at most 16, and keep
//          the fastest: an awkward count can fit no layout, or a slow one)
//          linear lr' = lr x B'/B (Goyal et al. 2017), sqrt lr' = lr x sqrt(B'/B) (Krizhevsky 2014).
// A node that lost a GPU is left out whole (its GPUs idle): a layout places whole nodes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"
#include "plan/estimate.h"
#include "plan/search.h"

namespace trident::plan {

// --gpus-left --lost-nodes --nodelist --batch --lr-rule --from-checkpoint --plan-json (trident replan).
std::vector<OptionDef> replan_options();

// Slurm's hostlist form: "node[001-004,007],gpu5" -> node001 node002 node003 node004 node007 gpu5
// (zero padding kept). A malformed list is a problem naming it.
std::vector<std::string> expand_slurm_nodelist(const std::string& text, Problems& problems);

struct Survivors {
  int64_t nodes = 0;       // whole nodes left
  int64_t gpus = 0;        // their GPUs
  int64_t idle_gpus = 0;   // GPUs left on nodes that are not whole (not used)
  std::string how;         // how they were counted, for the report
};
// From a count of GPUs left, a list of lost nodes (names or Slurm hostlists; each a distinct
// node), or the hostlist of the nodes left. Problems when none is left or more are lost than there are.
Survivors survivors_from_gpus(int64_t gpus_left, const ClusterSpec& cluster, Problems& problems);
Survivors survivors_from_lost_nodes(const std::vector<std::string>& lost, const ClusterSpec& cluster, Problems& problems);
Survivors survivors_from_nodelist(const std::vector<std::string>& left, const ClusterSpec& cluster, Problems& problems);

enum class BatchPolicy { Keep, Scale };
enum class LrRule { Linear, Sqrt };
std::string to_string(BatchPolicy p);
std::string to_string(LrRule r);

struct SurvivorPlan {
  Estimate original;              // the plan as it was, on the whole cluster
  Survivors survivors;
  BatchPolicy policy = BatchPolicy::Keep;
  LrRule rule = LrRule::Linear;
  int64_t batch_before = 0, batch_after = 0;
  double lr_factor = 1;           // 1 under keep; B'/B or sqrt(B'/B) under scale
  std::optional<Estimate> best;   // the best layout for the survivors; empty when none fits
  SearchResult search;            // its search (rejected counts when none fits)
  int64_t nodes_used = 0;         // of the survivors: the count whose best layout is fastest
  int64_t node_counts_tried = 0;  // counts tried, from all the survivors down
  int64_t batches_tried = 0;      // searches made (scale: global batches from B' down, per count)
  double step_ratio = 0;          // new step time / old
  double throughput_ratio = 0;    // new tokens/s / old
  double time_to_train_ratio = 0; // old tokens/s / new: how much longer the same tokens take
};

SurvivorPlan replan_for_survivors(const RunSpec& original, const Survivors& survivors, BatchPolicy policy, LrRule rule,
                                  const CostConstants& cost, double overhead_bytes, int top);

// The survivors' run (the best layout, its cluster and batch) as RunSpec, for the checks and --emit.
RunSpec survivor_run(const SurvivorPlan& plan);

}  // namespace trident::plan
