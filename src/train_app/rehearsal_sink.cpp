// The rehearsal report from the step records (see rehearsal_sink.h).
#include "train_app/rehearsal_sink.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/input_file.h"
#include "core/median.h"
#include "rehearse/rehearsal_prediction.h"
#include "report/html_page.h"
#include "report/output_file.h"
#include "report/rehearsal_report.h"

namespace trident::train_app {

namespace {

using parallel::RunEnd;
using parallel::RunStart;
using parallel::StepRecord;
using parallel::TrainSettings;

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

class RehearsalSink : public parallel::StepSink {
 public:
  explicit RehearsalSink(const TrainSettings& s) : s_(s) {}

  // The run-wide values (warm-up steps, the measured wire times); steps come later.
  void start(const RunStart& r) override {
    report_.run = r.run;
    report_.warmup = s_.warmup_steps >= 0 ? std::min(s_.warmup_steps, std::max<int64_t>(0, r.run_steps - 1))
                                          : std::min<int64_t>(2, r.run_steps / 4);
    report_.pp_message_s = r.pp_message_s;
    report_.cp_block_s = r.cp_block_s;
    report_.ep_clock_error_s = r.ep_clock_error_s;
    report_.straggler_rule = r.straggler_rule;
    report_.straggler_off = r.straggler_off;
    report_.first_step = r.first_step;  // a resumed run's losses start after the checkpoint's steps
  }

  void step(const StepRecord& r) override {
    report_.losses.push_back(r.loss);
    report_.cp_blocks = r.cp_blocks;
    report_.times.push_back(r.times);
    if (r.ep_load_imbalance > 0) report_.ep_load_imbalance.push_back(r.ep_load_imbalance);
    for (const std::string& x : r.stragglers) report_.stragglers.push_back(x);
    if (r.val_loss) report_.val_losses.push_back({r.step, *r.val_loss});
  }

  // Rank 0's rehearsal report: the measured shares beside the planner's prediction.
  void finish(const RunEnd& r) override {
    if (r.world == 1 && s_.report_path.empty() && s_.html_path.empty()) return;
    report_.load = r.load;
    for (int k = 0; k < r.world; ++k)
      report_.ranks.push_back({k, r.mesh.coords_of(k), r.memory[size_t(k) * 2], r.memory[size_t(k) * 2 + 1]});
    try {
      // Not opened here: a FIFO would block; the cluster file's reader refuses special files.
      report_.ep_load_imbalance_given = s_.moe_load_imbalance_given;
      if (special_file_kind(s_.prediction_cluster) == "missing")
        report_.prediction_missing = "no cluster file '" + s_.prediction_cluster + "': run `trident bench` first";
      else
        report_.prediction = rehearse::predict(rehearsed_routing(s_.run, report_), s_.prediction_cluster,
                                               std::max(1u, std::thread::hardware_concurrency()), s_.prediction_cost);
    } catch (const std::exception& e) {
      report_.prediction_missing = std::string("planner failed: ") + e.what();
    }
    if (r.world > 1) std::printf("%s", rehearsal_text(report_).c_str());
    if (!s_.report_path.empty()) {
      write_output_file(s_.report_path, rehearsal_json(report_).dump(2) + "\n", "--report");
      std::printf("rehearsal report written to %s\n", s_.report_path.c_str());
    }
    if (!s_.html_path.empty()) {
      write_output_file(s_.html_path, html_page(rehearsal_page(rehearsal_json(report_).dump())), "--html");
      std::printf("rehearsal report page written to %s\n", s_.html_path.c_str());
    }
  }

 private:
  const TrainSettings s_;
  RehearsalData report_;
};

}  // namespace

std::unique_ptr<parallel::StepSink> rehearsal_sink(const parallel::TrainSettings& s) {
  return std::make_unique<RehearsalSink>(s);
}

}  // namespace trident::train_app
