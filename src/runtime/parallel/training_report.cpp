// What a run of `trident train` is held against: the rehearsal report (the measured shares beside
// the planner's prediction) and the straggler watch's predicted compute per stage.
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
#include "plan/estimate.h"
#include "report/html_page.h"
#include "report/output_file.h"
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
#include "report/rehearsal_report.h"
#include "rehearse/rehearsal_prediction.h"
#include "runtime/parallel/resource_check.h"
#include "runtime/parallel/save_interval.h"
#include "runtime/parallel/straggler_watch.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "launch/openmp_wait.h"
#include "runtime/parallel/resumed_run.h"
#include "runtime/parallel/run_agreement.h"

namespace trident::parallel::loop_detail {

namespace {

// The run as the prediction sees it: under expert parallelism with the load imbalance the steps
// measured (the median after the warm-up steps; the router's, at this run's weights), unless
// --moe-load-imbalance gave one.
RunSpec rehearsed_routing(const RunSpec& run, const RehearsalData& report) {
  RunSpec r = run;
  if (report.ep_load_imbalance_given) return r;
  std::vector<double> measured(report.ep_load_imbalance.begin() +
                                   std::min<ptrdiff_t>(report.warmup, ptrdiff_t(report.ep_load_imbalance.size())),
                               report.ep_load_imbalance.end());
  if (measured.empty()) measured = report.ep_load_imbalance;
  if (r.layout.ep > 1 && !measured.empty()) r.model.moe_load_imbalance = std::max(1.0, median(measured));
  return r;
}

}  // namespace

// The straggler watch: each rank's stage's compute as the planner predicts it on the prediction
// cluster (the rehearsal's prediction run); off without one, `off` says why. With --stage-layers
// (one per stage) stage s is predicted as stage s of the same run with that many layers in every
// stage (its own layers, and the embedding or logits where it is first or last).
StragglerWatch straggler_watch(const TrainSettings& s, const Mesh& mesh, int world, std::string& off) {
  if (s.prediction_cluster.empty() || special_file_kind(s.prediction_cluster) == "missing") {
    off = "no prediction cluster file ('" + s.prediction_cluster + "': run `trident bench` first)";
    return {};
  }
  const int64_t pp = s.run.layout.pp;
  if (!s.stage_layers.empty() && int64_t(s.stage_layers.size()) != pp) {
    off = "--stage-layers splits virtual stages, which the prediction does not split so";
    return {};
  }
  try {
    const RunSpec r = rehearse::prediction_run(s.run, s.prediction_cluster, std::max(1u, std::thread::hardware_concurrency()),
                                     s.prediction_cost);
    std::vector<double> stage_s(static_cast<size_t>(pp));
    for (int64_t st = 0; st < pp; ++st) {
      RunSpec even = r;
      if (!s.stage_layers.empty()) even.model.layers = s.stage_layers[size_t(st)] * pp;
      const plan::Estimate e = plan::estimate(even, 0.0);
      if (int64_t(e.stages.size()) != pp) {
        off = "the prediction has no time per pipeline stage";
        return {};
      }
      const plan::StageTime& t = e.stages[size_t(st)];
      stage_s[size_t(st)] = double(e.micro_batches) * (t.compute_forward_s + t.compute_backward_s);
    }
    std::vector<double> predicted;
    std::vector<int64_t> stage_of;
    for (int rank = 0; rank < world; ++rank) {
      stage_of.push_back(mesh.coords_of(rank).pp());
      predicted.push_back(stage_s[size_t(stage_of.back())]);
    }
    StragglerRule rule;
    rule.factor = s.straggler_factor;
    return StragglerWatch(predicted, stage_of, rule);
  } catch (const std::exception& x) {
    off = std::string("the planner failed: ") + x.what();
    return {};
  }
}

// Rank 0's rehearsal report: the measured shares beside the planner's prediction, as text
// (several ranks), JSON (--report) and a page (--html).
void write_rehearsal(RehearsalData& report, const TrainSettings& s, const Mesh& mesh, const std::vector<float>& mems,
                     int world) {
  for (int r = 0; r < world; ++r)
    report.ranks.push_back({r, mesh.coords_of(r), mems[size_t(r) * 2], mems[size_t(r) * 2 + 1]});
  try {
    // Not opened here: a FIFO would block; the cluster file's reader refuses special files.
    report.ep_load_imbalance_given = s.moe_load_imbalance_given;
    if (special_file_kind(s.prediction_cluster) == "missing") report.prediction_missing = "no cluster file '" + s.prediction_cluster + "': run `trident bench` first";
    else
      report.prediction = rehearse::predict(rehearsed_routing(s.run, report), s.prediction_cluster,
                                  std::max(1u, std::thread::hardware_concurrency()), s.prediction_cost);
  } catch (const std::exception& e) {
    report.prediction_missing = std::string("planner failed: ") + e.what();
  }
  if (world > 1) std::printf("%s", rehearsal_text(report).c_str());
  if (!s.report_path.empty()) {
    write_output_file(s.report_path, rehearsal_json(report).dump(2) + "\n", "--report");
    std::printf("rehearsal report written to %s\n", s.report_path.c_str());
  }
  if (!s.html_path.empty()) {
    write_output_file(s.html_path, html_page(rehearsal_page(rehearsal_json(report).dump())), "--html");
    std::printf("rehearsal report page written to %s\n", s.html_path.c_str());
  }
}

// The rehearsal report's run-wide values (warm-up steps, the measured wire times); steps come later.
RehearsalData start_report(const TrainSettings& s, const DistTrainer& trainer, int64_t run_steps) {
  RehearsalData report;
  report.run = s.run;
  report.warmup = s.warmup_steps >= 0 ? std::min(s.warmup_steps, std::max<int64_t>(0, run_steps - 1))
                                      : std::min<int64_t>(2, run_steps / 4);
  report.pp_message_s = trainer.pp_message_s();
  report.cp_block_s = trainer.cp_block_s();
  report.ep_clock_error_s = trainer.ep_clock_error_s();
  return report;
}

void add_report_step(RehearsalData& report, const DistTrainer& trainer, double loss, const std::vector<PhaseTimes>& row) {
  report.losses.push_back(loss);
  report.cp_blocks = trainer.cp_blocks_per_step();
  report.times.push_back(row);
  if (trainer.routing_stats().ep_load_imbalance > 0) report.ep_load_imbalance.push_back(trainer.routing_stats().ep_load_imbalance);
}

}  // namespace trident::parallel::loop_detail
