// What the trainer emits for whoever reports on the run: the run-wide values, one record per step
// and the run's end, handed to a StepSink its caller gives (TrainPlanning::report). The trainer
// knows nothing of the report built from them (src/train_app/rehearsal_sink.h writes the
// rehearsal report: the measured shares beside the planner's prediction).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/machine_load.h"
#include "core/mesh.h"
#include "core/phase_times.h"
#include "core/run_spec.h"

namespace trident::parallel {

struct RunStart {
  RunSpec run;
  int64_t run_steps = 0;            // steps this run makes (to --stop-at, after the resumed ones)
  int64_t first_step = 0;           // steps done before this run (a resumed checkpoint's)
  double pp_message_s = 0;          // one pipeline message's wire time (ping-pong at start-up)
  double cp_block_s = 0;            // one KV block round the cp ring
  double ep_clock_error_s = 0;      // the EP ranks' clocks aligned to within this
  std::string straggler_rule;       // the straggler watch's rule; empty: not watched,
  std::string straggler_off;        // and why
};

struct StepRecord {
  int64_t step = 0;                 // counted from 1
  double loss = 0;
  std::vector<PhaseTimes> times;    // every rank's phase times of the step (core/step_terms.h)
  int64_t cp_blocks = 0;            // KV and KV-gradient blocks rank 0 sent
  double ep_load_imbalance = 0;     // the most loaded ep rank's rows over the mean; 0: no EP dispatch
  std::optional<double> val_loss;   // when the step validated
  std::vector<std::string> stragglers;  // one sentence per rank named at this step
};

struct RunEnd {
  Mesh mesh;
  int world = 1;
  std::vector<float> memory;        // per rank: trainer buffers, peak resident bytes
  std::optional<MachineLoad> load;  // rank 0's node over the run, when its ranks are all there
};

// Every rank emits start and steps; rank 0 alone calls finish (it writes what the sink builds).
class StepSink {
 public:
  virtual ~StepSink() = default;
  virtual void start(const RunStart& r) = 0;
  virtual void step(const StepRecord& r) = 0;
  virtual void finish(const RunEnd& r) = 0;
};

}  // namespace trident::parallel
