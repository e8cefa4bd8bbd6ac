// How busy the machine was while this process measured something: other processes' CPU time
// (all cores' busy time from /proc/stat, less this process's own from getrusage) over the wall
// time of the measurement. Rates per second of CPU time survive a loaded machine only in part
// (shared caches, memory bandwidth, a virtual machine's host), so a measurement says when it
// was taken under load instead of presenting such figures as the machine's.
// Plain data, so the reports print it; runtime/engine/machine_load.h's LoadProbe measures it.
#pragma once

#include <string>

namespace trident {

struct MachineLoad {
  bool known = false;        // /proc/stat was readable at both ends
  double wall_s = 0;         // the measurement's wall time
  int cores = 0;             // CPUs /proc/stat lists
  int threads = 1;           // the cores this process meant to use
  double busy_cpu_s = 0;     // every core's busy time (user, system, irq, a hypervisor's steal)
  double self_cpu_s = 0;     // this process's CPU time (user + system); a run of several ranks
                             // on the node may set it to theirs summed, and threads to their cores
  // The cores' busy time less ours: every other process's.
  double others_cpu_s() const;
  // The share of the cores this process meant to use that it had: self / (wall x threads).
  double cpu_share() const;
  // Cores other processes kept busy on average: others / wall.
  double other_cores_busy() const;
  // Under load: this process had less than 90% of its cores, or others kept more than half of
  // the cores it left free busy.
  bool under_load() const;
  // One line for a report, e.g. "had 0.43 of 1 core; other processes kept 1.57 of 2 cores busy
  // (over 2.10 s)", or "unknown (no /proc/stat)".
  std::string describe() const;
};

}  // namespace trident
