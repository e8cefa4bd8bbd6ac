// What the trainer takes from the planning side, handed in by its caller (src/train_app/:
// train_app::planning() fills every field from plan/, rehearse/ and report/), so runtime/parallel
// links none of them. Each field is the planner's own function, called where the trainer needs it
// (after the run check, so an invalid run never reaches the planner); run_training refuses settings
// whose planning is not complete.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/execution_spec.h"
#include "core/mesh.h"
#include "core/mfu.h"
#include "core/model_spec.h"
#include "core/problems.h"
#include "runtime/parallel/step_records.h"
#include "runtime/parallel/straggler_watch.h"

namespace trident::parallel {

struct TrainSettings;

// The planner's memory of one pipeline stage (plan::StageMemory's figures the trainer shows).
struct PlannedStage {
  int64_t stage = 0;
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0;
  double gathered_weights_bytes = 0;  // ZeRO-3's gathered units
  double total_bytes = 0;
};

struct TrainPlanning {
  // plan::stage_memory of the model with this execution on tp x pp x dp x cp (no overhead).
  std::function<std::vector<PlannedStage>(const ModelSpec&, const ExecutionSpec&, int64_t tp, int64_t pp, int64_t dp,
                                          int64_t cp)>
      stage_memory;
  // plan::mfu_of: the model FLOPs of a step of `global_batch` sequences against a peak.
  std::function<Mfu(const ModelSpec&, int64_t global_batch, double step_s, double peak_flops)> mfu;
  // plan::active_mlp_params_per_layer: the MLP parameters a token uses (the start-up table's step FLOPs).
  std::function<double(const ModelSpec&)> active_mlp_params_per_layer;
  // The prediction's cluster and cost files checked in the run check (a problem each).
  std::function<void(const TrainSettings&, int64_t world, Problems&)> check_prediction;
  // The straggler watch from the planner's compute per stage; off (and `off` says why) without one.
  std::function<StragglerWatch(const TrainSettings&, const Mesh&, int world, std::string& off)> straggler_watch;
  // The sink of the run's step records (the rehearsal report), made on every rank.
  std::function<std::unique_ptr<StepSink>(const TrainSettings&)> report;

  // The fields not set, named ("stage_memory, mfu"); empty when complete.
  std::string missing() const;
};

}  // namespace trident::parallel
