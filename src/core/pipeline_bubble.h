// The pipeline's fill and drain in closed form, written once: the planner's step (pipeline_time),
// its lower bound for the search, the simulator's check and the rehearsal's choice of
// micro-batches all take the schedule's bubble from here.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/execution_spec.h"

namespace trident {

// What divides the fill and drain of p stages: each stage idles (p - 1) / k of its per-micro-batch
// work. k = 1 for GPipe and 1F1B; v for the interleaved schedule (the fill is made of chunks, a
// v-th of a stage each; Narayanan et al. 2021); 3 for ZB-H1 (the weight-gradient passes fill two
// thirds of the 1F1B bubble; Qi et al. 2023).
inline double bubble_divisor(ScheduleKind schedule, int64_t virtual_stages) {
  if (schedule == ScheduleKind::Interleaved) return double(std::max<int64_t>(virtual_stages, 1));
  if (schedule == ScheduleKind::ZeroBubbleH1) return 3.0;
  return 1.0;
}

// The bubble's share of the pipeline's time for equal stages and free communication:
// (p - 1) / (k m + p - 1); 0 without a pipeline.
inline double closed_form_bubble_share(ScheduleKind schedule, int64_t p, int64_t m, int64_t virtual_stages) {
  if (p <= 1) return 0.0;
  return double(p - 1) / (bubble_divisor(schedule, virtual_stages) * double(m) + double(p - 1));
}

}  // namespace trident
