#include "runtime/parallel/save_interval.h"

#include <fmt/format.h>

#include <cmath>

#include "core/young_daly.h"

namespace trident::parallel {

AutoSaveInterval auto_save_interval(double save_s, double step_s, double rate, int64_t ranks) {
  AutoSaveInterval a;
  a.save_s = save_s, a.step_s = step_s, a.failures_per_1000_gpu_days = rate, a.ranks = ranks;
  a.mtbf_s = job_mtbf_s(rate, ranks);
  a.interval_s = young_daly_interval_s(save_s, a.mtbf_s);
  a.steps = interval_in_steps(a.interval_s, step_s);
  return a;
}

std::string auto_save_interval_text(const AutoSaveInterval& a) {
  if (a.steps == 0)
    return fmt::format("checkpoint interval (--checkpoint-every auto): no failures expected ({} per 1000 GPU-days): "
                       "saved at the end only",
                       a.failures_per_1000_gpu_days);
  return fmt::format("checkpoint interval (--checkpoint-every auto): sqrt(2 x save {:.4g} s (measured) x MTBF {:.4g} s "
                     "(1 / ({:.4g} failures per 1000 GPU-days x {} ranks))) = {:.4g} s / step {:.4g} s (measured) = "
                     "every {} steps",
                     a.save_s, a.mtbf_s, a.failures_per_1000_gpu_days, a.ranks, a.interval_s, a.step_s, a.steps);
}

}  // namespace trident::parallel
