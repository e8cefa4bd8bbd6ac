#include "launch/openmp_wait.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "launch/cpu_cores.h"

namespace trident::launch {

namespace {

constexpr const char* kReason = "TRIDENT_OPENMP_WAIT_REASON";  // why trident set the policy (for the note)

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const std::string_view text(v);
  const std::string_view first = text.substr(0, text.find(','));  // "4,2": the outer level
  int64_t n = 0;
  auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), n);
  return ec == std::errc() && end == first.data() + first.size() && n > 0 ? n : fallback;
}

// --threads N or --threads=N on the command line; 0 when absent.
int64_t threads_flag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    std::string_view value;
    if (a == "--threads" && i + 1 < argc) value = argv[i + 1];
    else if (a.rfind("--threads=", 0) == 0) value = a.substr(10);
    else continue;
    int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    return ec == std::errc() && end == value.data() + value.size() && n > 0 ? n : 0;
  }
  return 0;
}

}  // namespace

WaitChoice openmp_wait(int64_t node_ranks, int64_t threads, double load, int64_t cores) {
  WaitChoice c;
  if (threads < 2) return c;  // one thread per rank: no OpenMP team, nothing waits
  const double demand = double(node_ranks * threads) + std::max(0.0, load);
  if (demand <= double(cores)) return c;
  c.passive = true;
  c.why = fmt::format("{} rank{} x {} thread{}{} > {} core{}", node_ranks, node_ranks == 1 ? "" : "s", threads,
                      threads == 1 ? "" : "s", load > 0 ? fmt::format(" + load {:.1f} of other processes", load) : "",
                      cores, cores == 1 ? "" : "s");
  return c;
}

void wait_passively_when_oversubscribed(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "train") return;
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;  // the user's choice stands
  // Ranks on this node as the launchers say (Open MPI, MPICH / Hydra, Slurm); one without them.
  int64_t ranks = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 0);
  if (ranks == 0) ranks = env_int("MPI_LOCALNRANKS", 0);
  if (ranks == 0) ranks = env_int("SLURM_NTASKS_PER_NODE", 1);
  const int64_t cores = affinity_cores();
  int64_t threads = threads_flag(argc, argv);
  if (threads == 0) threads = env_int("OMP_NUM_THREADS", std::max<int64_t>(1, cores / ranks));
  double avg[1] = {0};
  const double load = getloadavg(avg, 1) == 1 ? avg[0] : 0;
  const WaitChoice c = openmp_wait(ranks, threads, load, cores);
  if (!c.passive) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv(kReason, c.why.c_str(), 1);
}

std::string openmp_wait_note() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (!policy) return "";
  const char* why = std::getenv(kReason);
  return fmt::format("OpenMP wait policy {} (OMP_WAIT_POLICY={}{})", policy, policy,
                     why ? std::string(", set by trident: ") + why : std::string(", from the environment"));
}

}  // namespace trident::launch
