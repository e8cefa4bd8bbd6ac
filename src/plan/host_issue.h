// The host's floor under a micro-batch: a stack that issues each kernel from Python (PyTorch
// eager with Megatron-Core, DeepSpeed, torchtitan) spends CostTable::host_launch_us of CPU time
// per kernel launch; the GPU runs behind the CPU, so when issuing a micro-batch's kernels takes
// longer than the GPU takes to run them, the GPU waits and the difference is exposed:
//   host_s = launches x host_launch_us,  exposed = max(0, host_s - gpu_s)
// per stage and micro-batch (gpu_s: the stage's compute and communication of one micro-batch).
// CUDA graphs issue a captured scope as one launch per pass (forward; backward, recompute
// included), and full-iteration graphs the whole step: no floor. The planner (estimate.cpp) and
// the simulator (sim/plan_costs.cpp) both take it from here.
#pragma once

#include <cstdint>
#include <string>

#include "core/cost_table.h"
#include "core/execution_spec.h"
#include "plan/kernel_calls.h"

namespace trident::plan {

struct HostIssue {
  bool applies = false;      // the stack issues from Python and the step is not one graph
  int64_t kernels = 0;       // kernels of one micro-batch on the stage (layers, embedding, logits, EP all-to-alls)
  int64_t graphed = 0;       // of them, inside CUDA graphs
  int64_t graphs = 0;        // graph launches replacing them
  int64_t forward_launches = 0, backward_launches = 0;  // what the host issues: kernels - graphed + graphs
  double launch_us = 0;      // CostTable::host_launch_us
  double host_s = 0;         // (forward + backward launches) x launch_us
  double gpu_s = 0;          // the stage's time of one micro-batch on the GPU it races
  double exposed_s = 0;      // max(0, host_s - gpu_s): the GPU's wait for the host
  int64_t launches() const { return forward_launches + backward_launches; }
  // The share of the wait in the forward pass (by its launches): how the simulator splits it.
  double forward_share() const { return launches() > 0 ? double(forward_launches) / double(launches()) : 0.5; }
};

// One stage's host issue for one micro-batch: `layers` layers of `per_layer` kernels (scoped by
// layer_kernel_calls), the embedding's kernels on the first stage and the logits' on the last.
HostIssue host_issue(const ExecutionSpec& exec, const KernelCalls& per_layer, int64_t layers, bool first, bool last,
                     double gpu_s, const CostTable& c);

// "2308 + 4036 = 6344 launches x 67 us = 425.05 ms against 165.70 ms on the GPU: 259.35 ms
// exposed" (with graphs: how many kernels they hold, in how many graph launches).
std::string describe(const HostIssue& h);

}  // namespace trident::plan
