// `trident train --checkpoint-every auto`: the interval between saves that loses least to
// failures (Young/Daly, core/young_daly.h), from the first save's measured time and the
// step's measured time, for the failure rate of --failures-per-1000-gpu-days on this many ranks.
#pragma once

#include <cstdint>
#include <string>

namespace trident::parallel {

inline constexpr int64_t kCheckpointEveryAuto = -1;  // TrainSettings::checkpoint_every for "auto"

struct AutoSaveInterval {
  double save_s = 0, step_s = 0;   // measured: the slowest rank's first save, and the step
  double failures_per_1000_gpu_days = 0;
  int64_t ranks = 0;
  double mtbf_s = 0;               // of the job: 1 / (rate x ranks)
  double interval_s = 0;           // sqrt(2 x save x MTBF)
  int64_t steps = 0;               // interval / step, rounded, at least 1 (0: no failures, save at the end only)
};
AutoSaveInterval auto_save_interval(double save_s, double step_s, double failures_per_1000_gpu_days, int64_t ranks);
std::string auto_save_interval_text(const AutoSaveInterval& a);  // one line, every input named

}  // namespace trident::parallel
