// The metrics file of `trident train` (--metrics, rank 0): opening it, one JSON line per step with
// the routing statistics, and a write that fails stopping the run naming it.
#include "runtime/parallel/training_loop_parts.h"


#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/input_file.h"
#include "core/vocab_padding.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/engine/machine_load.h"
#include "runtime/engine/machine_rates.h"
#include "runtime/engine/perf.h"
#include "runtime/engine/run_meta.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/checkpointing.h"
#include "runtime/parallel/dist_train.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/metrics_writer.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/resource_check.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/straggler_watch.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "launch/openmp_wait.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/run_agreement.h"

namespace trident::parallel::loop_detail {

// Metrics file: opened by rank 0 before any step; every rank learns whether it could.
void open_metrics(MetricsWriter& metrics, int rank, const TrainSettings& s, ProcessGroups& groups) {
  double ok = 1;
  if (rank == 0 && !s.metrics_path.empty() && !metrics.open(s.metrics_path)) ok = 0;
  all_reduce_f64(*groups.world, &ok, 1, comm::ReduceOp::Min);
  if (ok < 0.5) {
    Problems p;
    p.add("cannot write the metrics file '" + s.metrics_path + "'", "check the folder exists and is writable",
          "metrics-open");
    p.throw_if_any();
  }
}

// One line of the metrics file; with several ranks, where the step went (mean share over ranks).
nlohmann::json metrics_line(int64_t done, double loss, double lr, double tps, double mfu, double grad_norm,
                            double seconds, const std::optional<double>& v, const std::vector<PhaseTimes>& row,
                            int world) {
  nlohmann::json j = {{"step", done}, {"loss", loss}, {"lr", lr}, {"tokens_per_s", tps}, {"mfu", mfu},
                      {"grad_norm", grad_norm}, {"step_s", seconds}};
  if (v) j["val_loss"] = *v;
  if (world > 1) {  // where the step went, mean share over ranks
    PhaseTimes mean;
    for (const auto& p : row) {
      mean.compute += p.compute / world, mean.tp += p.tp / world, mean.pp += p.pp / world;
      mean.bubble += p.bubble / world, mean.dp_exposed += p.dp_exposed / world;
      mean.optimizer += p.optimizer / world, mean.total += p.total / world, mean.ep += p.ep / world;
    }
    const double T = mean.total > 0 ? mean.total : 1;
    j["time_shares"] = {{"compute", mean.compute / T}, {"tp", mean.tp / T}, {"pp", mean.pp / T},
                        {"bubble", mean.bubble / T}, {"dp_exposed", mean.dp_exposed / T},
                        {"optimizer", mean.optimizer / T}, {"other", mean.other() / T}};
    if (mean.ep > 0) j["time_shares"]["ep_alltoall"] = mean.ep / T;
  }
  return j;
}

// The metrics-write error every rank stops with at step `done`; `kept` says what of the run is kept.
void throw_metrics_write(const TrainSettings& s, const std::string& metrics_error, int64_t done,
                         const std::string& kept) {
  Problems p;
  p.add(fmt::format("{} (the metrics file, at step {}); the run stopped there",
                    metrics_error.empty() ? "rank 0 could not write the metrics file '" + s.metrics_path + "'"
                                          : metrics_error,
                    done),
        "free space on its disk, or give --metrics a path on another disk; " + kept, "metrics-write");
  p.throw_if_any();
}

// A write (or the close) of the metrics file; a failure is kept in `error` for the next check.
void write_metrics(MetricsWriter& metrics, const nlohmann::json& j, std::string& error) {
  try {
    metrics.write(j);
  } catch (const InputError& e) {
    error = e.problems().front().what;
  }
}

void close_metrics(MetricsWriter& metrics, std::string& error) {
  try {
    metrics.close();
  } catch (const InputError& e) {
    error = e.problems().front().what;
  }
}

// Mixture of experts: each MoE layer's routing over the step's global batch (tokens per expert
// before dropping, assignments dropped at the capacity).
void add_routing(nlohmann::json& j, const RoutingStats& r) {
  if (r.empty()) return;
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < r.layers.size(); ++i)
    layers.push_back({{"layer", r.layers[i]}, {"tokens_per_expert", r.tokens_per_expert[i]}, {"dropped", r.dropped[i]}});
  j["moe_routing"] = layers;
  if (r.ep_load_imbalance > 0) j["ep_load_imbalance"] = r.ep_load_imbalance;
}

}  // namespace trident::parallel::loop_detail
