// The pieces of run_training (training_loop.h) in files of their own: the start-up table
// (training_startup.cpp) and the metrics lines (training_metrics.cpp). What the run is held
// against (the rehearsal report, the straggler watch's prediction) is the caller's
// (TrainPlanning, filled by src/train_app/).
// Private to runtime/parallel.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/median.h"
#include "core/mesh.h"
#include "core/phase_times.h"
#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/metrics_writer.h"
#include "runtime/parallel/process_groups.h"
#include "runtime/parallel/straggler_watch.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel::loop_detail {

inline std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0)); }

inline std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", int(s / 60), int(s) % 60);
  return fmt::format("{}h{:02d}m", int(s / 3600), int(s / 60) % 60);
}

using trident::median;  // core/median.h

// Activation memory of every rank (ActivationMemory: slots, slot bytes, recompute scratch).
struct RankActivations {
  int64_t stage = 0;
  ActivationMemory memory;
};

// The peak MFU divides by, all ranks together. CPU ranks: the FMA peak of a core (what `trident
// bench` writes as the device's peak: per second of the thread's own CPU time, so a busy machine
// does not lower it) times the cores each rank may use. GPU ranks: the best 1536^3 sgemm rate.
struct Peak {
  double flops = 0;
  std::string how;
  std::string which;  // the summary's short name of it: "AVX-512 FMA, 16 chains, x 2 cores"
};

// The planner's memory per rank: the largest stage.
double planned_bytes(const TrainSettings& s);

// Per pipeline stage: the largest activation memory of its ranks beside the planner's
// activations of that stage, so the recomputation recipe's saving can be checked against it.
void print_activations(const TrainSettings& s, const std::vector<RankActivations>& ranks);

Peak measure_peak(const TrainSettings& s, kernels::Kernels& k, comm::Communicator& world, int threads,
                  int64_t node_ranks);

void print_startup(const TrainSettings& s, int world, const DistTrainer& trainer, const BatchSource& data,
                   const std::string& device, const std::string& threads, const Peak& peak, double step_flops,
                   int64_t first_step, const std::vector<RankActivations>& activations);

// Metrics file: opened by rank 0 before any step; every rank learns whether it could.
void open_metrics(MetricsWriter& metrics, int rank, const TrainSettings& s, ProcessGroups& groups);

// One line of the metrics file; with several ranks, where the step went (mean share over ranks).
nlohmann::json metrics_line(int64_t done, double loss, double lr, double tps, double mfu, double grad_norm,
                            double seconds, const std::optional<double>& v, const std::vector<PhaseTimes>& row,
                            int world);

// The metrics-write error every rank stops with at step `done`; `kept` says what of the run is kept.
void throw_metrics_write(const TrainSettings& s, const std::string& metrics_error, int64_t done,
                         const std::string& kept);

// A write (or the close) of the metrics file; a failure is kept in `error` for the next check.
void write_metrics(MetricsWriter& metrics, const nlohmann::json& j, std::string& error);

void close_metrics(MetricsWriter& metrics, std::string& error);

// Mixture of experts: each MoE layer's routing over the step's global batch (tokens per expert
// before dropping, assignments dropped at the capacity).
void add_routing(nlohmann::json& j, const RoutingStats& r);

}  // namespace trident::parallel::loop_detail
