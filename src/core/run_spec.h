// RunSpec: model + cluster + layout + execution, resolved from presets, TOML and flags.
//
// Resolution collects every problem of the whole config before throwing, so a user fixes all
// of them in one round.
#pragma once

#include <optional>

#include "core/cluster_spec.h"
#include "core/cost_table.h"
#include "core/execution_spec.h"
#include "core/layout.h"
#include "core/model_spec.h"
#include "core/options.h"

namespace trident {

struct RunSpec {
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  ExecutionSpec exec;
  std::optional<CostTable> cost;  // resolved by resolve_run; unset: the built-in table of the GPU
};

// The cost table a run is estimated with: its own, or the built-in one for its GPU.
CostTable cost_table(const RunSpec& run);

// Each resolver reads its options group; missing sizes fall back to the preset, then defaults.
ModelSpec resolve_model(const OptionValues& values, Problems& problems);
ClusterSpec resolve_cluster(const OptionValues& values, Problems& problems);
// dp defaults to world / (tp * pp). When --nodes is absent and tp*pp*dp is a whole number of
// nodes, the cluster is sized to fit the layout.
Layout resolve_layout(const OptionValues& values, ClusterSpec& cluster, Problems& problems);
// default_stack: the preset that applies when --stack is not given ("" = the runtime's defaults).
ExecutionSpec resolve_execution(const OptionValues& values, Problems& problems, const std::string& default_stack = "");
// The stack plan, lint and simulate predict when --stack is not given: on a GPU cluster (a 16-bit
// tensor-core peak above the fp32 one) what users run there, Megatron-Core with Transformer
// Engine; on a CPU cluster (trident bench's) "" = the runtime's own defaults, what train runs.
std::string default_stack(const ClusterSpec& cluster);

// Sequence parallel when not given: on where it fits (tp > 1 and tp x cp dividing the sequence:
// sequence_parallel_fits), where off is dominated (the same TP traffic, more activation memory
// and time), so plan never picks it off unless asked; lint, simulate and topo take the same
// layout's recipe the same way (train keeps the runtime's default, off).
bool sequence_parallel_by_default(const Layout& layout, int64_t seq_len);
void default_sequence_parallel(const OptionValues& values, RunSpec& run);

// Resolves everything the options hold and checks that the pieces fit together; throws
// InputError with every problem found. With check_batch the execution's batch sizes are
// checked against the layout too.
RunSpec resolve_run(const OptionValues& values, bool check_batch);

// Checks that hold between model, cluster, layout and batch: the layout rules of
// core/layout_rules.h (world size, tp dividing heads, ...; the batch rules with check_batch),
// the sizes that must not overflow, fp8 on a GPU without it. Each problem has a code.
void check_run(const RunSpec& run, bool check_batch, Problems& problems);
// --recompute-modules the model has no such module for (mla_up_proj without MLA, moe_act without
// experts) or the planner does not model (moe, shared_experts): each by name. Part of check_run.
void check_recompute_modules(const ModelSpec& model, const ExecutionSpec& exec, Problems& problems);

// Divisors of n in ascending order, for fixes ("use --tp 1, 2, 3, 4, 6 or 12").
std::vector<int64_t> divisors(int64_t n);

}  // namespace trident
