// What the runtime can execute, checked without it: the capability part of `trident train`'s
// one run check (runtime/parallel/dist_train.h's check_trainable adds the settings, data,
// checkpoint and output checks) and of the planner's rehearsal check (rehearsal_check.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/checked_size.h"
#include "core/problems.h"
#include "core/run_spec.h"

namespace trident::capability {

// Whether the kernels of `device` ("cpu", "cuda") compute in `p`: cpu in fp32; cuda in fp32 and
// bf16; an unknown device in nothing. The runtime's kernels::device_supports gives this answer.
bool device_computes(const std::string& device, Precision p);

// The ranks of some layout dimensions, or 0 when one is not positive or the product is beyond
// any cluster (check_run names such a layout with every term; here it must not wrap around).
int64_t layout_ranks(std::initializer_list<SizeTerm> dims);

// The one check of an explicit split: `stages` counts (one per virtual stage), each 1 or more,
// summing to the model's layers; the sum is checked (counts near 2^62 would wrap around 64 bits
// to the right total). `flag` names where the counts came from ("--stage-layers").
void check_stage_split(int64_t model_layers, int64_t stages, const std::vector<int64_t>& explicit_layers,
                       const std::string& flag, Problems& problems);

// Those of m.beyond_family() the runtime's layers do not train (what `train` and `import` refuse):
// all of them but the norm epsilon (both families) and, in the Llama family, a head width of its
// own and QK-norm (Qwen3's attention), sliding windows and sinks (GPT-OSS's), Llama 3.1's rope
// scaling; in either family's MoE layer DeepSeek-V3's router (sigmoid scores, expert bias, routed
// scaling; not its group limit).
std::vector<std::string> beyond_runtime(const ModelSpec& m);

// The run on ranks of `device`: core's check_run on a cluster of exactly the layout's ranks
// (heads, ffn, layers and batch against the layout), then what the runtime executes (GPT / Llama,
// cp on the CPU, MoE without shared experts, ep with ZeRO 0-1, ZeRO 0-3, fp32 — bf16 on CUDA —,
// the stack's settings, the schedule's shape, `stage_layers` when given), each problem with its fix and its code.
void check_executable(const RunSpec& run, const std::string& device, const std::vector<int64_t>& stage_layers,
                      Problems& problems);

}  // namespace trident::capability
