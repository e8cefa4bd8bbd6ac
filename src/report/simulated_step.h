// One simulated training step of a run, with its timeline: what `trident simulate` prints and
// draws, and what the HTML reports of plan and lint show. One place, so they agree.
#pragma once

#include <string>

#include "core/mesh.h"
#include "core/run_spec.h"
#include "report/timeline.h"
#include "schedule/schedule.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"

namespace trident {

struct SimulatedStep {
  sim::PlannedCosts costs;
  PipelineSchedule schedule;
  sim::SimResult result;
  double closed_form_bubble = 0;
  int64_t micro_batches = 0, virtual_stages = 1;
};

// `run` must pass check_run; throws InputError when the schedule cannot take its shape.
SimulatedStep simulate_step(const RunSpec& run, double overhead_bytes = 0);

// "ranks 0-7" or "ranks 0,8,.." for the first replica's stage s.
std::string stage_ranks(const Mesh& mesh, int64_t stage);

// The step as a Timeline: one row per stage, titled with the layout and subtitled with its numbers.
Timeline step_timeline(const RunSpec& run, const Mesh& mesh, const SimulatedStep& step);

}  // namespace trident
