// The machine-load figures bench and the rehearsal report print: the arithmetic on given times,
// and a probe's readings (no speed asserted: only what holds however busy the machine is).
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <string>

#include "runtime/engine/machine_load.h"

namespace trident::engine {
namespace {

MachineLoad load(double wall, int cores, int threads, double busy, double self) {
  MachineLoad m;
  m.known = true, m.wall_s = wall, m.cores = cores, m.threads = threads, m.busy_cpu_s = busy, m.self_cpu_s = self;
  return m;
}

TEST(MachineLoad, a_quiet_machine_is_not_under_load) {
  const MachineLoad m = load(2.0, 2, 1, 2.2, 2.0);  // ours: 2 s of 2; others: 0.2 s
  EXPECT_DOUBLE_EQ(m.cpu_share(), 1.0);
  EXPECT_NEAR(m.others_cpu_s(), 0.2, 1e-12);
  EXPECT_NEAR(m.other_cores_busy(), 0.1, 1e-12);
  EXPECT_FALSE(m.under_load());
  EXPECT_EQ(m.describe(), "had 1.00 of 1 core; other processes kept 0.10 of 2 cores busy (over 2.00 s)");
}

TEST(MachineLoad, two_busy_loops_on_two_cores_are_load) {
  // A busy loop per core beside a one-thread measurement: it gets 2/3 of a core, they 4/3.
  const MachineLoad m = load(3.0, 2, 1, 6.0, 2.0);
  EXPECT_NEAR(m.cpu_share(), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(m.other_cores_busy(), 4.0 / 3.0, 1e-12);
  EXPECT_TRUE(m.under_load());
  EXPECT_EQ(m.describe(), "had 0.67 of 1 core; other processes kept 1.33 of 2 cores busy (over 3.00 s)");
}

TEST(MachineLoad, others_on_the_free_cores_count_beyond_half_of_them) {
  EXPECT_FALSE(load(1.0, 4, 1, 2.4, 1.0).under_load());  // others 1.4 of the 3 free cores
  EXPECT_TRUE(load(1.0, 4, 1, 2.6, 1.0).under_load());   // others 1.6 of them
  EXPECT_TRUE(load(1.0, 4, 1, 1.8, 0.8).under_load());   // ours only 0.8 of our core
  EXPECT_TRUE(load(1.0, 1, 1, 1.6, 1.0).under_load());   // no free core: half a core of others is load
}

TEST(MachineLoad, shares_stay_in_range_and_unknown_is_never_load) {
  EXPECT_DOUBLE_EQ(load(1.0, 2, 1, 1.0, 1.3).cpu_share(), 1.0);  // helper threads: not more than asked for
  EXPECT_DOUBLE_EQ(load(1.0, 2, 1, 1.0, 1.3).others_cpu_s(), 0.0);  // tick rounding: never negative
  MachineLoad unknown;
  EXPECT_FALSE(unknown.under_load());
  EXPECT_EQ(unknown.describe(), "unknown (no /proc/stat)");
}

double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

TEST(LoadProbe, counts_this_process_and_the_cores_of_proc_stat) {
  std::ifstream in("/proc/stat");
  if (!in) GTEST_SKIP() << "no /proc/stat";
  int cores = 0;
  for (std::string line; std::getline(in, line) && line.rfind("cpu", 0) == 0;) cores += line[3] != ' ';
  const LoadProbe probe(1);
  volatile double x = 0;
  for (const double t0 = process_cpu_s(); process_cpu_s() - t0 < 0.1;) x = x + 1;  // 0.1 s of our CPU time
  const MachineLoad m = probe.stop();
  ASSERT_TRUE(m.known);
  EXPECT_EQ(m.cores, cores);
  EXPECT_EQ(m.threads, 1);
  EXPECT_GE(m.self_cpu_s, 0.09);                 // getrusage sees the CPU time spent
  // No bound of CPU time by wall time: the process's CPU time counts every thread of it (the BLAS's
  // and OpenMP's pools too), which can exceed the wall time of the probe.
  EXPECT_GT(m.wall_s, 0.0);
  EXPECT_GE(m.busy_cpu_s, m.self_cpu_s - 0.02 * cores);  // /proc/stat counts it too (10 ms ticks per core)
}

}  // namespace
}  // namespace trident::engine
