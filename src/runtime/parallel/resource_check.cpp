// The resource check (see resource_check.h).
#include "runtime/parallel/resource_check.h"

#include <sched.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>


namespace trident::parallel {

namespace {

// Bytes as GiB, or MiB below one GiB (a small checkpoint must not read "0.0 GiB").
std::string gib(double bytes) {
  if (bytes >= double(1ull << 30)) return fmt::format("{:.1f} GiB", bytes / double(1ull << 30));
  return fmt::format("{:.2f} MiB", bytes / double(1ull << 20));
}

// MemAvailable of /proc/meminfo in bytes; < 0 when unreadable.
double mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return -1;
}

// The room left under this process's cgroup (v2) memory limit; < 0 without a limit.
double cgroup_room() {
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  double current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current)) return -1;
  try {
    return std::max(0.0, std::stod(max_text) - current);
  } catch (const std::exception&) {
    return -1;
  }
}

// The folder a checkpoint at `path` is written in (the nearest one that exists), and its free bytes.
std::pair<std::string, double> disk_free(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path folder = fs::absolute(fs::path(path), ec).parent_path();
  while (!folder.empty() && !fs::is_directory(folder, ec) && folder != folder.root_path()) folder = folder.parent_path();
  struct statvfs st {};
  if (folder.empty() || ::statvfs(folder.c_str(), &st) != 0) return {folder.string(), -1};
  return {folder.string(), double(st.f_bavail) * double(st.f_frsize)};
}

// What one rank sends to the others: its node's memory, its own estimate and its node's sum.
struct RankReport {
  double node_need, available, source, node_ranks, local_root;
  double stage, weights, gradients, optimizer, activations;
  double gpu_free, gpu_sharing, gpu_weights, gpu_gradients, gpu_optimizer, gpu_activations;
};
constexpr int kReportFields = sizeof(RankReport) / sizeof(double);
const char* kSources[] = {"/proc/meminfo MemAvailable", "the cgroup's memory.max - memory.current"};

std::string memory_text(const RankMemory& m) {
  return fmt::format("weights {} + gradients {} + AdamW m, v {} + activations {}", gib(m.weights), gib(m.gradients),
                     gib(m.optimizer), gib(m.activations));
}

// The fixes, the largest part first.
std::string memory_fixes(const TrainSettings& s, const RankMemory& m) {
  const bool activations_first = m.activations > m.weights + m.gradients + m.optimizer;
  const std::string activations = "a smaller --micro-batch-size or --seq-len, --recompute full, ";
  std::string fix = activations_first ? activations : "";
  fix += "fewer --layers or a smaller --hidden (" + std::to_string(s.run.model.layers) + " layers, hidden " +
         std::to_string(s.run.model.hidden) + " now), more ranks to split the model over (--pp, --tp), ";
  if (s.run.layout.dp > 1 && s.run.exec.zero == 0) fix += "--zero 1 (AdamW moments sharded over dp), ";
  if (!activations_first && m.activations > 0.25 * m.total()) fix += activations;
  return fix + "or fewer ranks per node";
}

}  // namespace

RankMemory rank_memory(const TrainSettings& s, int64_t stage, Precision precision) {
  ExecutionSpec exec = s.run.exec;
  exec.precision = precision;
  if (precision == Precision::FP32) exec.grad_bits = 32;
  const Layout& L = s.run.layout;
  RankMemory r;
  r.stage = stage;
  if (!s.planning.stage_memory) throw std::logic_error("rank_memory: TrainSettings::planning.stage_memory is not set");
  for (const PlannedStage& st : s.planning.stage_memory(s.run.model, exec, L.tp, L.pp, L.dp, 1))
    if (st.stage == stage) {
      r.weights = st.weights_bytes;
      r.gradients = st.gradients_bytes;
      r.optimizer = st.optimizer_bytes;
      r.activations = st.activations_bytes + st.gathered_weights_bytes;
    }
  return r;
}

ResourceView gather_resources(const TrainSettings& s, comm::World& ranks, int64_t stage) {
  const RankMemory mine = rank_memory(s, stage, Precision::FP32);
  RankReport me{};
  me.stage = double(mine.stage), me.weights = mine.weights, me.gradients = mine.gradients;
  me.optimizer = mine.optimizer, me.activations = mine.activations;
  // The node's memory, read once by its first rank so every rank of it sees the same figure.
  std::unique_ptr<comm::World> local = ranks.split_host(0);
  const int local_rank = local->rank(), local_size = local->size();
  double node[2] = {-1, 0};
  if (local_rank == 0) {
    const double avail = mem_available(), room = cgroup_room();
    node[0] = avail;
    if (room >= 0 && (avail < 0 || room < avail)) node[0] = room, node[1] = 1;
  }
  double need = mine.total();
  local->broadcast(node, sizeof node, 0);
  local->all_reduce(&need, &need, 1, comm::ReduceOp::Sum);
  local.reset();
  me.available = node[0], me.source = node[1], me.node_need = need, me.node_ranks = local_size;
  me.local_root = local_rank == 0 ? 1 : 0;
  // This rank's GPU: its free memory, and the estimate in the run's precision.
  me.gpu_free = -1, me.gpu_sharing = 1;
  if (s.device_memory) {
    try {
      const DeviceMemory d = s.device_memory();
      const RankMemory g = rank_memory(s, stage, s.run.exec.precision);
      me.gpu_free = d.free_bytes, me.gpu_sharing = double(std::max<int64_t>(1, d.ranks_sharing));
      me.gpu_weights = g.weights, me.gpu_gradients = g.gradients, me.gpu_optimizer = g.optimizer;
      me.gpu_activations = g.activations;
    } catch (const InputError&) {
      // No usable GPU: the device's own start-up names the cause, with its fix.
    }
  }
  std::vector<RankReport> all(static_cast<size_t>(ranks.size()));
  ranks.all_gather(&me, all.data(), sizeof(double) * kReportFields);

  // The node that lacks the most (need / available), and its largest rank.
  ResourceView v;
  double worst = -1;
  for (const auto& r : all) {
    if (r.local_root < 0.5) continue;
    const double ratio = r.available > 0 ? r.node_need / r.available : (r.available < 0 ? 0 : 1e300);
    if (ratio > worst) {
      worst = ratio;
      v.node_ranks = int64_t(r.node_ranks), v.node_need = r.node_need, v.memory_available = r.available;
      v.memory_source = kSources[r.source > 0.5 ? 1 : 0];
    }
  }
  for (const auto& r : all)
    if (r.weights + r.gradients + r.optimizer + r.activations > v.largest.total())
      v.largest = {int64_t(r.stage), r.weights, r.gradients, r.optimizer, r.activations};
  double gpu_worst = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    const RankReport& r = all[i];
    if (r.gpu_free < 0) continue;
    const RankMemory g{int64_t(r.stage), r.gpu_weights, r.gpu_gradients, r.gpu_optimizer, r.gpu_activations};
    const double ratio = g.total() * r.gpu_sharing / std::max(1.0, r.gpu_free);
    if (ratio > gpu_worst)
      gpu_worst = ratio, v.gpu_rank = int64_t(i), v.gpu_free = r.gpu_free, v.gpu_sharing = int64_t(r.gpu_sharing),
      v.gpu_largest = g;
  }
  v.own_node_ranks = local_size;
  // The checkpoint's folder as rank 0 sees it (the one that writes the manifest).
  if (!s.checkpoint_path.empty()) {
    auto [folder, free_bytes] = disk_free(s.checkpoint_path);
    ranks.broadcast(&free_bytes, sizeof free_bytes, 0);
    v.disk_folder = folder, v.disk_free = free_bytes;
  }
  return v;
}

void check_resources(const TrainSettings& s, const ResourceView& v, Problems& problems) {
  const ModelSpec& m = s.run.model;
  if (s.device == "cpu" && v.memory_available >= 0 && v.node_need > v.memory_available)
    problems.add(fmt::format("the run needs {} of host memory on a node ({} rank{} there; the largest, pipeline "
                             "stage {}: {} = {}, by plan::stage_memory in fp32), but the node has {} available ({})",
                             gib(v.node_need), v.node_ranks, v.node_ranks == 1 ? "" : "s", v.largest.stage,
                             gib(v.largest.total()), memory_text(v.largest), gib(v.memory_available),
                             v.memory_source),
                 "use " + memory_fixes(s, v.largest), "host-memory");
  if (v.gpu_free >= 0 && v.gpu_largest.total() * double(v.gpu_sharing) > v.gpu_free)
    problems.add(fmt::format("rank {} needs {} of GPU memory ({} rank{} on its GPU; each, pipeline stage {}: {} = {}, by "
                             "plan::stage_memory in {}), but the GPU has {} free (cudaMemGetInfo)",
                             v.gpu_rank, gib(v.gpu_largest.total() * double(v.gpu_sharing)), v.gpu_sharing,
                             v.gpu_sharing == 1 ? "" : "s", v.gpu_largest.stage, gib(v.gpu_largest.total()),
                             memory_text(v.gpu_largest), to_string(s.run.exec.precision), gib(v.gpu_free)),
                 "use " + memory_fixes(s, v.gpu_largest) + " (one rank per GPU)", "gpu-memory");
  if (v.disk_free >= 0) {
    const ParamCount pc = count_parameters(m);
    const double bytes = 12.0 * double(pc.total);
    if (bytes > v.disk_free)
      problems.add(fmt::format("the checkpoint '{}' takes {} ({:.0f} bytes = 12 bytes per parameter, fp32 weights and "
                               "AdamW m, v, x {} parameters), but its folder '{}' has {} free ({:.0f} bytes, statvfs)",
                               s.checkpoint_path, gib(bytes), bytes, pc.total, v.disk_folder, gib(v.disk_free),
                               v.disk_free),
                   "free disk space there, or give --checkpoint a folder on a disk with room", "checkpoint-disk");
  }
}

ThreadChoice choose_threads(const TrainSettings& s, int64_t node_ranks, int64_t cores, int64_t hardware) {
  node_ranks = std::max<int64_t>(1, node_ranks);
  // A rank pinned by its launcher (fewer cores than the machine's) has its cores to itself;
  // unpinned ranks of a node share all of them.
  const bool pinned = cores < hardware;
  const int64_t share = pinned ? cores : std::max<int64_t>(1, cores / node_ranks);
  const std::string where = pinned ? fmt::format("this rank is pinned to {} of the {} cores (sched_getaffinity)", cores,
                                                 hardware)
                    : node_ranks == 1 ? fmt::format("this rank has the node's {} cores (sched_getaffinity)", cores)
                                      : fmt::format("{} ranks on this node share its {} cores (sched_getaffinity)",
                                                    node_ranks, cores);
  ThreadChoice c;
  if (!s.threads_given) {
    c.threads = int(share);
    c.note = fmt::format("{} per rank: {}", share, where);
  } else if (s.threads > share) {
    c.threads = int(share);
    c.note = fmt::format("{} {} capped to {} per rank: {}", s.threads_from, s.threads, share, where);
  } else {
    c.threads = int(s.threads);
    c.note = fmt::format("{} per rank ({}); {}", s.threads, s.threads_from, where);
  }
  if (!pinned && node_ranks > cores)
    c.note += fmt::format("; {} ranks on {} cores are oversubscribed (each waits for a core)", node_ranks, cores);
  return c;
}

}  // namespace trident::parallel
