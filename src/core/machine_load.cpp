// The machine load record's arithmetic (see machine_load.h).
#include "core/machine_load.h"

#include <algorithm>

#include <fmt/format.h>

namespace trident {

// At most 1: helper threads of ours (MPI progress, idle OpenMP workers) are not more cores than it asked for.
double MachineLoad::cpu_share() const {
  return wall_s > 0 ? std::min(1.0, self_cpu_s / (wall_s * std::max(1, threads))) : 0;
}

// Ticks are 10 ms: over a short measurement the busy time can round below our own.
double MachineLoad::others_cpu_s() const { return std::max(0.0, busy_cpu_s - self_cpu_s); }

double MachineLoad::other_cores_busy() const { return wall_s > 0 ? others_cpu_s() / wall_s : 0; }

bool MachineLoad::under_load() const {
  if (!known) return false;
  const int free_cores = std::max(0, cores - threads);
  return cpu_share() < 0.9 || other_cores_busy() > 0.5 * std::max(1, free_cores);
}

std::string MachineLoad::describe() const {
  if (!known) return "unknown (no /proc/stat)";
  return fmt::format("had {:.2f} of {} core{}; other processes kept {:.2f} of {} cores busy (over {:.2f} s)",
                     cpu_share(), threads, threads == 1 ? "" : "s", other_cores_busy(), cores, wall_s);
}

}  // namespace trident
