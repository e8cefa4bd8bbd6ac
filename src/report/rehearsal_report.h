// The rehearsal report: where each rank's step time went (compute, TP collectives, the CP
// ring's exposed KV exchange, pipeline transfers, bubble, exposed DP reduction), the share of each, peak memory per rank, and the
// planner's prediction for the same layout on the cluster description `trident bench` wrote.
// The trainer fills RehearsalData (runtime/parallel/training_loop.cpp) and the prediction
// (rehearse/rehearsal_prediction.h); this writes it.
//
// Shares are of the mean step wall time, averaged over ranks and over the measured steps (the
// first `warmup` steps are left out: they pay for page faults and first-touch). Every number is
// a sum of measured intervals the JSON lists per step and rank, so it can be checked by hand.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_spec.h"
#include "core/machine_load.h"
#include "core/mesh.h"
#include "core/phase_times.h"
#include "core/step_terms.h"

namespace trident {

struct RankInfo {
  int rank = 0;
  Coords coords;
  double allocated_bytes = 0;  // parameters, gradients, optimizer state, activations, buffers
  double peak_rss_bytes = 0;   // resident-set high-water of the process
};

struct Prediction {
  std::string cluster_source;  // the TOML file the cluster came from
  std::string cluster;         // its one-line description
  std::string note;            // what was adapted (ranks sharing cores, fp32)
  std::string cost_source;     // where the cost table came from (built-in, the file's [cost] table)
  std::string cost;            // the table, one line
  std::vector<std::pair<std::string, double>> cost_values;  // the table, per field
  double step_s = 0;
  // The planner's terms (core/step_terms.h): time.*term.planned; its EP wait is the wait for
  // the most loaded ep rank's experts at ep_load_imbalance.
  TimeBreakdown time;
  double ep_load_imbalance = 1;  // the model's moe_load_imbalance the prediction used
  double peak_memory_bytes = 0;
};

struct RehearsalData {
  RunSpec run;
  int64_t warmup = 0;
  std::vector<double> losses;  // of the steps first_step + 1, first_step + 2, ... (counted from 1)
  int64_t first_step = 0;      // steps done before this run (a resumed checkpoint's)
  std::vector<std::pair<int64_t, double>> val_losses;  // (step, validation loss) of each evaluation
  std::vector<std::vector<PhaseTimes>> times;  // [step][rank]
  std::vector<RankInfo> ranks;
  double pp_message_s = 0;
  double cp_block_s = 0;      // one KV block round the cp ring (measured ring shift)
  int64_t cp_blocks = 0;      // KV and KV-gradient blocks rank 0 sends per step
  // An EP all-to-all's own time runs from the last rank's entry to the last exit; a call's time
  // beyond it is the EP wait, counted apart like the bubble. The ranks' clocks are aligned at
  // start-up to within this many seconds.
  double ep_clock_error_s = 0;
  // Per step: the rows the most loaded ep rank received over the mean (RoutingStats), which the
  // prediction takes (median over the measured steps) for the planner's --moe-load-imbalance.
  std::vector<double> ep_load_imbalance;
  bool ep_load_imbalance_given = false;  // the prediction took --moe-load-imbalance instead
  std::optional<Prediction> prediction;
  std::string prediction_missing;  // why there is no prediction
  // Rank 0's node over the run (start to end): the ranks there against every other process, so
  // a report measured on a busy machine says so.
  std::optional<MachineLoad> load;
  // Ranks slower than their stage's prediction (runtime/parallel/straggler_watch.h): the rule,
  // and one sentence per rank named (empty rule: not watched, `straggler_off` says why).
  std::string straggler_rule, straggler_off;
  std::vector<std::string> stragglers;
};

std::string rehearsal_text(const RehearsalData& d);
nlohmann::json rehearsal_json(const RehearsalData& d);

}  // namespace trident
