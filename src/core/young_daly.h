// The checkpoint interval that loses least to failures (Young 1974 / Daly 2006): pure formulas
// shared by plan's time to train with failures (plan/goodput.h) and train's --checkpoint-every
// auto (runtime/parallel/save_interval.h), which must not link the planner.
#pragma once

#include <cstdint>

namespace trident {

// The job's mean time between failures: 1 / (failures per GPU-second x GPUs); infinite without failures.
double job_mtbf_s(double failures_per_1000_gpu_days, int64_t gpus);
// Young/Daly: the interval between saves that loses least, sqrt(2 x save x MTBF), in whole steps
// (at least 1; 0 without failures: no save is needed for them).
double young_daly_interval_s(double save_s, double mtbf_s);
int64_t interval_in_steps(double interval_s, double step_s);

}  // namespace trident
