// Options of `trident plan` and `trident lint` beyond the shared model/cluster/layout/execution
// groups: how many candidates to show, JSON output, per-stage memory, and the memory overhead.
#pragma once

#include <vector>

#include "core/options.h"

namespace trident::plan {

std::vector<OptionDef> plan_options();  // --top --json --per-stage --overhead-gib

struct OutputOptions {
  int top = 5;
  bool json = false;
  bool per_stage = false;
  double overhead_bytes = 0;  // context, communication buffers, workspaces, fragmentation
};

// Default overhead: CUDA context (~0.5 GiB), NCCL buffers (~1 GiB), cuBLAS workspaces and the
// allocator's fragmentation (~1.5 GiB). Explicit, configurable, never zero.
constexpr double kDefaultOverheadGiB = 3.0;

OutputOptions resolve_output(const OptionValues& values, Problems& problems);

}  // namespace trident::plan
