// Resources: a training run that needs more than the machine has is refused before anything is
// allocated, with the estimate and its breakdown beside what is there, or (threads) capped
// with a note saying why. Part of the run check, on every rank, the same problems everywhere.
//   host memory: the planner's memory of each rank's pipeline stage (plan::stage_memory, fp32:
//     weights, gradients, AdamW m and v, activations: within a few percent of what the trainer
//     allocates, as the start-up table shows), summed over the ranks of a node, against that
//     node's MemAvailable (/proc/meminfo), or its cgroup's room (memory.max - memory.current)
//     when that is smaller;
//   GPU memory: a rank's estimate in its own precision against the free memory of its GPU;
//   threads: --threads above the cores a rank may run on (sched_getaffinity), or a node's
//     ranks x threads above its cores, is capped to what the cores hold;
//   disk: the checkpoint (fp32 weights and AdamW m, v) against the free space of its folder (statvfs).
#pragma once

#include <cstdint>
#include <string>

#include "core/problems.h"
#include "launch/cpu_cores.h"
#include "runtime/comm/world.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel {

// A rank's memory by the planner, for its pipeline stage.
struct RankMemory {
  int64_t stage = 0;
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double total() const { return weights + gradients + optimizer + activations; }
};
RankMemory rank_memory(const TrainSettings& s, int64_t stage, Precision precision);

// What the resource check compares, the same on every rank: the node whose ranks need the most
// host memory for what it has, and the checkpoint folder as rank 0 sees it.
struct ResourceView {
  int64_t node_ranks = 1;         // ranks on that node
  double node_need = 0;           // their estimates, summed
  RankMemory largest;             // its largest rank
  double memory_available = -1;   // bytes; < 0: unknown (no /proc/meminfo): not checked
  std::string memory_source;      // "/proc/meminfo MemAvailable" or the cgroup's room
  double disk_free = -1;          // bytes free in the checkpoint's folder; < 0: no checkpoint
  std::string disk_folder;        // the folder statvfs was asked about
  // The rank whose GPU lacks the most (device_memory set and readable; else gpu_free < 0).
  int64_t gpu_rank = 0, gpu_sharing = 1;
  double gpu_free = -1;
  RankMemory gpu_largest;         // that rank's estimate, in the run's precision
  int64_t own_node_ranks = 1;     // ranks on this rank's own node (for its threads; rank-local)
};

// Reads what each node has (its first rank reads /proc/meminfo and statvfs) and gathers it;
// collective over the run's world (a SelfWorld for one process).
ResourceView gather_resources(const TrainSettings& s, comm::World& world, int64_t stage);

// Host memory, the checkpoint's disk and (device_memory set) the GPU's memory: each shortfall a
// problem with the estimate, its breakdown, what is available and the fixes.
void check_resources(const TrainSettings& s, const ResourceView& view, Problems& problems);

// Kernel threads of this rank: --threads, else the cores shared by the node's ranks; capped to
// the cores this rank may run on and to the node's cores / its ranks, saying why in `note`.
struct ThreadChoice {
  int threads = 1;
  std::string note;  // how the count was chosen (shown in the start-up table)
};
// cores: CPU_COUNT of sched_getaffinity; hardware: std::thread::hardware_concurrency.
ThreadChoice choose_threads(const TrainSettings& s, int64_t node_ranks, int64_t cores, int64_t hardware);
using launch::affinity_cores;  // the cores this process may run on

}  // namespace trident::parallel
