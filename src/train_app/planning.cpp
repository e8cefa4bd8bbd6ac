// The trainer's planning side (see planning.h): the planner's memory, MFU and prediction, the
// straggler watch's per-stage compute and the rehearsal report.
#include "train_app/planning.h"

#include <algorithm>
#include <thread>

#include "core/input_file.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/memory_model.h"
#include "plan/mfu.h"
#include "rehearse/rehearsal_prediction.h"
#include "runtime/parallel/training_loop.h"
#include "train_app/rehearsal_sink.h"

namespace trident::train_app {

namespace {

using parallel::PlannedStage;
using parallel::StragglerWatch;
using parallel::TrainSettings;

std::vector<PlannedStage> stage_memory(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t pp,
                                       int64_t dp, int64_t cp) {
  std::vector<PlannedStage> out;
  for (const plan::StageMemory& st : plan::stage_memory(model, exec, plan::MemoryInputs{tp, pp, dp, 0, cp}))
    out.push_back({st.stage, st.weights_bytes, st.gradients_bytes, st.optimizer_bytes, st.activations_bytes,
                   st.gathered_weights_bytes, st.total_bytes()});
  return out;
}

// The prediction's cluster and cost files, read now when the run predicts (several ranks, or a
// report): a file the planner cannot use (a zero bandwidth) is refused before any step, rather
// than found by the report after the run. A missing cluster file stays the report's note (run
// `trident bench` first).
void check_prediction_inputs(const TrainSettings& s, int64_t world, Problems& problems) {
  if (world == 1 && s.report_path.empty() && s.html_path.empty()) return;
  if (s.prediction_cluster.empty() || special_file_kind(s.prediction_cluster) == "missing") return;
  try {
    rehearse::prediction_run(s.run, s.prediction_cluster, 1, s.prediction_cost);
  } catch (const InputError& e) {
    for (const Problem& x : e.problems())
      problems.add("--prediction-cluster '" + s.prediction_cluster + "': " + x.what,
                   x.fix + " (or give another --prediction-cluster, as `trident bench` writes it)",
                   x.code.empty() ? "prediction-cluster" : x.code);
  } catch (const std::exception& e) {
    problems.add("--prediction-cluster '" + s.prediction_cluster + "' cannot be used: " + e.what(),
                 "give the file `trident bench` writes", "prediction-cluster");
  }
}

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
    const RunSpec r = rehearse::prediction_run(s.run, s.prediction_cluster,
                                               std::max(1u, std::thread::hardware_concurrency()), s.prediction_cost);
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
    parallel::StragglerRule rule;
    rule.factor = s.straggler_factor;
    return StragglerWatch(predicted, stage_of, rule);
  } catch (const std::exception& x) {
    off = std::string("the planner failed: ") + x.what();
    return {};
  }
}

}  // namespace

parallel::TrainPlanning planning() {
  parallel::TrainPlanning p;
  p.stage_memory = stage_memory;
  p.mfu = plan::mfu_of;
  p.active_mlp_params_per_layer = plan::active_mlp_params_per_layer;
  p.check_prediction = check_prediction_inputs;
  p.straggler_watch = straggler_watch;
  p.report = rehearsal_sink;
  return p;
}

}  // namespace trident::train_app
