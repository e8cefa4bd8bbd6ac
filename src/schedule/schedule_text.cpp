#include <fmt/format.h>

#include <algorithm>

#include "schedule/schedule.h"

namespace trident {

std::string format_schedule(const PipelineSchedule& sc, bool compute_only) {
  std::string out;
  for (int64_t s = 0; s < sc.stages; ++s) {
    out += fmt::format("stage {}:", s);
    for (const Action& a : sc.programs[s]) {
      if (compute_only && !is_compute(a.kind)) continue;
      if (is_compute(a.kind) && sc.virtual_stages == 1) out += fmt::format(" {}{}", to_string(a.kind), a.micro_batch);
      else out += " " + to_string(a);
    }
    out += "\n";
  }
  return out;
}

int64_t peak_in_flight(const PipelineSchedule& sc, int64_t stage) {
  int64_t now = 0, peak = 0;
  for (const Action& a : sc.programs[stage]) {
    if (a.kind == ActionKind::Forward) peak = std::max(peak, ++now);
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) --now;
  }
  return peak;
}

}  // namespace trident
