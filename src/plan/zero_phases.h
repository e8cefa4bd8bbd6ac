// The data-parallel phases of one training step per ZeRO stage, written once: which collective
// moves which buffer, and when (once per step, after every micro-batch's backward, or layer by
// layer inside every micro-batch's passes). The planner's DP time (estimate.cpp via dp_phases)
// and the simulator's DP events (sim/plan_costs.cpp) are both built from this list, so they
// charge the same collectives with the same bytes.
//   ZeRO 0: one all-reduce of the gradients after the last backward;
//   ZeRO 1: one reduce-scatter of the gradients, then an all-gather of the new 16-bit weights;
//   ZeRO 2: gradients are not kept whole, so every micro-batch's backward ends with a
//           reduce-scatter, then the weight all-gather after the step;
//   ZeRO 3: the weights all-gathered before every forward and again before every backward, the
//           gradients reduce-scattered after every backward, layer by layer (no step-end phase).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::plan {

enum class DpCollective { AllReduce, ReduceScatter, AllGather };
enum class DpWhen {
  AfterLastBackward,    // once per step, behind the step's last backwards
  AfterEveryBackward,   // once per micro-batch, behind its backward
  AfterOptimizer,       // once per step, the updated weights (behind the next step's first forward)
  InsideEveryPass,      // per layer, inside every micro-batch's forward or backward (ZeRO-3)
};
enum class DpBuffer { Gradients, Weights };

struct ZeroPhase {
  DpCollective collective = DpCollective::AllReduce;
  DpWhen when = DpWhen::AfterLastBackward;
  DpBuffer buffer = DpBuffer::Gradients;
  double bytes = 0;       // one collective's buffer S (every layer's share together for ZeRO-3)
  int64_t per_step = 0;   // how many times a step runs it
  double seconds = 0;     // one collective on the group's link (dp_phases fills it; 0 here)
};

// The phases of one step for a GPU holding gradient_bytes of gradients and weight_bytes of
// weights as gathered, over a data-parallel group of dp ranks with m micro-batches per step.
// Empty when dp is 1 (nothing to reduce).
std::vector<ZeroPhase> zero_phases(int zero, int64_t micro_batches, double gradient_bytes, double weight_bytes,
                                   int64_t dp);

// Collectives and bytes per step of `phases`.
int64_t collectives_per_step(const std::vector<ZeroPhase>& phases);
double bytes_per_step(const std::vector<ZeroPhase>& phases);

std::string to_string(DpCollective c);
std::string to_string(DpWhen w);

}  // namespace trident::plan
