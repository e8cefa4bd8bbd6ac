// Can `trident train` rehearse a recipe the planner recommends? The rehearsal keeps the
// recipe's strategy (layout, schedule and virtual stages, ZeRO stage, recomputation, sequence
// parallel, model family) and runs it on CPU ranks at a small model size; the numeric stack
// settings a CPU rank cannot execute (bf16 / fp8, flash attention, TP and PP overlap, low-bit
// gradients) are replaced by the CPU's and named. What the runtime cannot execute at all (expert
// parallel, mixture-of-experts, ...) is refused by the runtime's one capability check
// (capability.h), whose problems say why: such a recipe is marked as not rehearsable.
#pragma once

#include <string>
#include <vector>

#include "core/problems.h"
#include "core/run_spec.h"

namespace trident::capability {

struct RehearsalCheck {
  std::vector<std::string> substitutions;  // "precision bf16 -> fp32 (the CPU kernels compute in fp32)"
  std::vector<Problem> refusals;           // the capability check's problems for the recipe on CPU ranks
  RunSpec run;                             // the recipe with those substitutions made
  bool rehearsable() const { return refusals.empty(); }
};

RehearsalCheck rehearsal_check(const RunSpec& recipe);

}  // namespace trident::capability
