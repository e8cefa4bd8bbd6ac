// ZeRO-3 / FSDP of a mixture of experts: each layer's local experts are all-gathered over their
// expert data parallel group (edp) and their gradients reduce-scattered there, inside the layer's
// passes, besides the dense part over dp x cp; their gathered buffers are counted. The planner's
// terms by hand, and the simulator playing them (no expert reduction left at the step's end).
#include <gtest/gtest.h>

#include "core/cluster_spec.h"
#include "core/execution_spec.h"
#include "core/model_spec.h"
#include "plan/estimate.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"

namespace trident::sim {
namespace {

// Mixtral 8x7B on 16 H100 (2 nodes), ep 8, dp 16, ZeRO 3: one expert of 3 x 4096 x 14336 =
// 176,160,768 parameters per layer and GPU, sharded over edp = dp / ep = 2.
RunSpec mixtral_zero3() {
  RunSpec run;
  run.model = model_preset("mixtral-8x7b");
  run.model.seq_len = 4096;
  run.cluster = cluster_preset("dgx-h100");
  run.cluster.nodes = 2;
  run.layout = Layout{1, 1, 16, 1, "tp-cp-ep-dp-pp", 8};
  run.exec.global_batch_size = 32;
  run.exec.micro_batch_size = 1;
  run.exec.recompute = Recompute::Full;
  apply_stack(*find_stack("megatron-core-te"), run.exec);
  run.exec.zero = 3;
  return run;
}

}  // namespace

// The old model gathered only the dense part (attention, norms, router): for Mixtral that is
// 0.22 B parameters a layer where its local expert holds 0.18 B more, never gathered.
TEST(MoeZero3, experts_are_gathered_per_layer_over_edp_by_hand) {
  const RunSpec run = mixtral_zero3();
  const PlannedCosts pc = costs_from_plan(run);
  const plan::Estimate& e = pc.estimate;
  const plan::StateBytes sb = plan::state_bytes(run.exec);
  const double expert = 176160768.0;
  EXPECT_DOUBLE_EQ(e.dp.expert_layer_params, expert);
  ASSERT_EQ(run.layout.size(Dim::EDP), 2);
  const double gather = plan::dp_comm(expert * sb.gathered, 2, e.links.edp.link, e.links.edp.members_per_node,
                                      run.cluster, 0, e.cost).total_s / 2;
  const double scatter = plan::dp_comm(expert * sb.gradients, 2, e.links.edp.link, e.links.edp.members_per_node,
                                       run.cluster, 0, e.cost).total_s / 2;
  EXPECT_GT(gather, 0);
  EXPECT_DOUBLE_EQ(e.dp.expert_layer_gather_s, gather);
  EXPECT_DOUBLE_EQ(e.dp.expert_layer_scatter_s, scatter);
  // Each chunk's forward gathers 32 layers' dense part and experts; backward gathers and scatters both.
  const std::vector<plan::Zero3Chunk> z = plan::zero3_stage(e, 0);
  ASSERT_EQ(z.size(), 1u);
  EXPECT_NEAR(z[0].forward.total_s, 32 * (e.dp.layer_gather_s + gather), 1e-12);
  EXPECT_NEAR(z[0].backward.total_s, 32 * (e.dp.layer_gather_s + gather + e.dp.layer_scatter_s + scatter), 1e-12);
  // No reduction of the experts' gradients at the end of the step: ZeRO-3 did it per layer.
  EXPECT_EQ(e.expert_dp.total_s, 0.0);
  // The gathered buffers: two MoE layers' attention, norms, router and local expert.
  const ParamCount p = count_parameters(run.model);
  const double layer = double(p.attention_per_layer + p.norms_per_layer + p.router_per_layer) + expert;
  EXPECT_DOUBLE_EQ(e.memory[0].gathered_weights_bytes, 2 * layer * sb.gathered);
}

// The simulator plays the same per-layer traffic inside the chunks and nothing at the end.
TEST(MoeZero3, simulator_plays_the_expert_gathers_as_the_planner) {
  const RunSpec run = mixtral_zero3();
  const PlannedCosts pc = costs_from_plan(run);
  auto sc = build_schedule(run.exec.schedule, run.layout.pp, pc.micro_batches, pc.virtual_stages);
  const SimResult r = simulate(sc, pc.costs);
  EXPECT_EQ(pc.costs.stages[0].dp_reduce_s, 0.0);
  const std::vector<plan::Zero3Chunk> z = plan::zero3_stage(pc.estimate, 0);
  EXPECT_NEAR(pc.costs.stages[0].chunks[0].dp_forward_s, z[0].forward.cost_s, 1e-12);
  EXPECT_NEAR(r.step_s / pc.estimate.time.step, 1.0, 0.03);
}

}  // namespace trident::sim
