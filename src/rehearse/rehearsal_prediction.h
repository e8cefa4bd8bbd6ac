// The planner's prediction of a rehearsal: the run on the cluster file `trident bench` wrote,
// adapted to this machine's CPU ranks, estimated by the planner (report/rehearsal_report.h prints it).
#pragma once

#include <cstdint>
#include <string>

#include "core/run_spec.h"
#include "report/rehearsal_report.h"

namespace trident::rehearse {

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

}  // namespace trident::rehearse
