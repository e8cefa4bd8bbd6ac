// The rehearsal report: where each rank's step time went (compute, TP collectives, the CP
// ring's exposed KV exchange, pipeline transfers, bubble, exposed DP reduction), the share of each, peak memory per rank, and the
// planner's prediction for the same layout on the cluster description `trident bench` wrote.
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
#include "runtime/engine/machine_load.h"
#include "runtime/parallel/dist_trainer.h"

namespace trident::parallel {

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
  double step_s = 0, compute_s = 0, tp_s = 0, pp_s = 0, bubble_s = 0, dp_s = 0, optimizer_s = 0;
  double cp_s = 0;  // the CP ring's exchange not hidden behind attention
  double ep_s = 0;  // the expert-parallel all-to-alls (dispatch and combine)
  double zero_gather_s = 0;  // of dp_s: ZeRO's weight all-gathers
  double peak_memory_bytes = 0;
};

struct RehearsalData {
  RunSpec run;
  int64_t warmup = 0;
  std::vector<double> losses;
  std::vector<std::vector<PhaseTimes>> times;  // [step][rank]
  std::vector<RankInfo> ranks;
  double pp_message_s = 0;
  double cp_block_s = 0;      // one KV block round the cp ring (measured ring shift)
  int64_t cp_blocks = 0;      // KV and KV-gradient blocks rank 0 sends per step
  std::optional<Prediction> prediction;
  std::string prediction_missing;  // why there is no prediction
  // Rank 0's node over the run (start to end): the ranks there against every other process, so
  // a report measured on a busy machine says so.
  std::optional<engine::MachineLoad> load;
};

std::string rehearsal_text(const RehearsalData& d);
nlohmann::json rehearsal_json(const RehearsalData& d);

// Planner's estimate of `run` on the cluster described by the TOML file (a [cluster] table and
// a [cost] table, as `trident bench` writes; without [cost] the built-in table applies). The ranks of this machine share its cores: when the world is larger
// than the cluster's GPUs per node, the cluster becomes one node holding them all, and each
// rank's compute rate is the measured one times cores / ranks (stated in the note). `cost_toml`
// (train's --cost FILE, may be empty) is read as plan reads --cost with --config CLUSTER-FILE:
// built-in, then that file, then the cluster file's [cost] keys.
Prediction predict(const RunSpec& run, const std::string& cluster_toml, int64_t hardware_cores,
                   const std::string& cost_toml = "");
// predict()'s two halves: the run it estimates (`run` on the cluster file's machine with its cost
// table, fp32, ranks sharing the cores; `note` says what was adapted), and the prediction of such
// a run with the cost table it holds (the self-calibration varies that table).
RunSpec prediction_run(const RunSpec& run, const std::string& cluster_toml, int64_t hardware_cores,
                       const std::string& cost_toml, std::string* note = nullptr);
Prediction prediction_of(const RunSpec& prediction_run);

}  // namespace trident::parallel
