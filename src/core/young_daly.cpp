#include "core/young_daly.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace trident {

double job_mtbf_s(double failures_per_1000_gpu_days, int64_t gpus) {
  const double failures_per_gpu_s = failures_per_1000_gpu_days / 1000.0 / 86400.0;
  return failures_per_gpu_s > 0 && gpus > 0 ? 1.0 / (failures_per_gpu_s * double(gpus)) : INFINITY;
}

double young_daly_interval_s(double save_s, double mtbf_s) { return std::sqrt(2 * save_s * mtbf_s); }

int64_t interval_in_steps(double interval_s, double step_s) {
  if (!std::isfinite(interval_s) || !(step_s > 0)) return 0;  // no failures: no reason to save for them
  const double steps = std::round(interval_s / step_s);
  return steps >= double(INT64_MAX / 2) ? INT64_MAX / 2 : std::max<int64_t>(1, int64_t(steps));
}

}  // namespace trident
