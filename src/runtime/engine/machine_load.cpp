#include "runtime/engine/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace trident::engine {

namespace {

struct CpuTimes {
  bool ok = false;
  double busy_s = 0;  // every core's non-idle time: user, nice, system, irq, softirq, steal
  int cores = 0;
};

// The first line of /proc/stat sums the cores (in clock ticks); the cpuN lines count them.
CpuTimes read_proc_stat() {
  CpuTimes c;
  std::ifstream in("/proc/stat");
  std::string line;
  const double tick = double(sysconf(_SC_CLK_TCK));
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) break;
    if (line.size() > 3 && line[3] == ' ') {
      std::istringstream f(line.substr(3));
      double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
      f >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
      if (!f || tick <= 0) return c;
      c.busy_s = (user + nice + system + irq + softirq + steal) / tick;  // guest time is inside user
      c.ok = true;
    } else {
      ++c.cores;
    }
  }
  c.ok = c.ok && c.cores > 0;
  return c;
}

double self_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LoadProbe::LoadProbe(int threads) : threads_(std::max(1, threads)) {
  const CpuTimes c = read_proc_stat();
  known_ = c.ok;
  busy0_ = c.busy_s;
  self0_ = self_cpu_s();
  wall0_ = wall_now();
}

MachineLoad LoadProbe::stop() const {
  MachineLoad m;
  const CpuTimes c = read_proc_stat();
  m.wall_s = wall_now() - wall0_;
  m.threads = threads_;
  m.self_cpu_s = self_cpu_s() - self0_;
  m.known = known_ && c.ok;
  m.cores = c.cores;
  if (m.known) m.busy_cpu_s = c.busy_s - busy0_;
  return m;
}

}  // namespace trident::engine
