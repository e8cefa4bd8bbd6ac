// Estimate: memory per stage and step time of one complete run (model, cluster, layout,
// execution), assembled from the memory and cost models with the links the Mesh gives each group.
#pragma once

#include <vector>

#include "core/mesh.h"
#include "core/run_spec.h"
#include "core/step_terms.h"
#include "plan/mfu.h"
#include "plan/context_parallel.h"
#include "plan/cost_model.h"
#include "plan/dim_link.h"
#include "plan/memory_model.h"
#include "plan/mixture_of_experts.h"

namespace trident::plan {

using trident::TimeBreakdown;  // core/step_terms.h: the planner's step time by term


struct Estimate {
  RunSpec run;
  CostConstants cost;              // the table it was estimated with
  int64_t micro_batches = 0;       // m per pipeline
  int64_t vocab_padded = 0;
  Links links;
  std::vector<StageMemory> memory;  // one per stage
  int64_t most_loaded_stage = 0;
  double capacity_bytes = 0;
  bool fits = false;
  std::vector<StageTime> stages;
  PipelineTime pipeline;
  // One layer's cp ring and ep all-to-alls for one micro-batch (what the slowest stage's
  // cp_comm_s and ep_comm_s add up over its layers), for the report's hand check.
  CpComm cp_ring;
  EpComm ep_alltoall;
  EpWait ep_wait;     // one layer's wait for the most loaded ep rank (what ep_wait_s adds up)
  PpComm pp_message;  // one pipeline send of one micro-batch (what pp_comm_s adds up), for the same check
  DpComm dp;          // dense gradients over dp x cp
  DpPhases dp_phases; // its phases per ZeRO stage (zero_phases.h), of the stage with the most parameters
  DpComm expert_dp;   // MoE: routed experts' gradients over the edp group (empty when dense)
  OptimizerTime optimizer;
  TimeBreakdown time;
  double tokens_per_s = 0;
  double executed_flops = 0;  // whole step, all GPUs, with recomputation
  double flash_recompute_flops = 0;  // of it: flash attention's backward recomputing the scores
  double model_flops = 0;     // whole step, without
  double tflops_per_gpu = 0;  // executed, as Megatron's papers report
  double mfu = 0;             // model FLOPs over peak, attention counted in full (mfu_figures.full())
  Mfu mfu_figures;            // both conventions, with the peak they divide by
  // Other rank orders of this very candidate the search merged into it (no slower than them):
  // each order with its tokens/s, so a top-N table shows distinct layouts.
  std::vector<std::pair<std::string, double>> other_orders;
  const StageMemory& peak_memory() const { return memory[most_loaded_stage]; }
};

// Needs a run whose sizes check_run accepts (positive, world size matching, batch divisible).
// Without a cost table: the run's own (cost_table(run): resolved, or built-in for its GPU).
Estimate estimate(const RunSpec& run, double overhead_bytes);

// ZeRO-3 / FSDP of one stage for one micro-batch, one entry per chunk of the stage (zero3_chunk):
// per-layer all-gathers and reduce-scatters of the stage's layers on the dp x cp group, hidden
// behind the stage's per-layer compute. Empty unless ZeRO 3 with more than one replica. The
// planner puts each chunk's into its ChunkTime (zero3_*), which the simulator plays.
std::vector<Zero3Chunk> zero3_stage(const Estimate& e, int64_t stage);
Estimate estimate(const RunSpec& run, double overhead_bytes, const CostConstants& c);
// Same, with links already computed (the search caches them per layout).
Estimate estimate_with_links(const RunSpec& run, const Links& links, double overhead_bytes);
Estimate estimate_with_links(const RunSpec& run, const Links& links, double overhead_bytes, const CostConstants& c);
// Same, with the stages' memory already computed (stage_memory of the run): it does not depend on
// the rank order, so the search computes it once for all the orders of a candidate.
Estimate estimate_with_links(const RunSpec& run, const Links& links, std::vector<StageMemory> memory,
                             const CostConstants& c);
// Same, but Estimate::links left empty: the search copies the links into the candidates it keeps only.
Estimate estimate_without_links(const RunSpec& run, const Links& links, std::vector<StageMemory> memory,
                                const CostConstants& c);

}  // namespace trident::plan
