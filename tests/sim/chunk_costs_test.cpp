// One evaluator: the planner builds each stage from its chunks (plan::ChunkTime) and the simulator
// plays those chunks as they are, so every term a stage's time holds is in the chunks the
// simulator plays, the MTP modules' all-to-alls on the last chunk included (the simulator once
// rebuilt the chunks from per-layer terms and left those out: -1.5% on a DeepSeek-V3 step).
#include <gtest/gtest.h>

#include "core/cluster_spec.h"
#include "core/execution_spec.h"
#include "core/model_spec.h"
#include "plan/estimate.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"

namespace trident::sim {
namespace {

// A DeepSeek-V3-like MoE with an MTP module, tp 2, ep 4, interleaved over 4 stages.
RunSpec moe_with_mtp(int zero, ScheduleKind schedule) {
  RunSpec run;
  run.model = model_preset("mixtral-8x7b");
  run.model.layers = 16;
  run.model.seq_len = 4096;
  run.model.mtp_layers = 1;
  run.model.moe_load_imbalance = 1.3;  // the most loaded ep rank 30% above the mean: an EP wait
  run.cluster = cluster_preset("dgx-h100");
  run.cluster.nodes = 4;
  run.layout = Layout{2, 1, 4, 4, "tp-cp-ep-dp-pp", 4};  // tp 2, cp 1, dp 4, pp 4
  run.exec.global_batch_size = 64;
  run.exec.micro_batch_size = 1;
  apply_stack(*find_stack(schedule == ScheduleKind::Interleaved ? "megatron-core-te" : "trident"), run.exec);
  run.exec.schedule = schedule;
  run.exec.virtual_stages = schedule == ScheduleKind::Interleaved ? 2 : 1;
  run.exec.zero = zero;
  return run;
}

}  // namespace

TEST(ChunkCosts, the_simulator_plays_every_term_of_the_planners_stages) {
  for (ScheduleKind schedule : {ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1})
    for (int zero : {0, 1, 2, 3}) {
      const RunSpec run = moe_with_mtp(zero, schedule);
      const PlannedCosts pc = costs_from_plan(run);
      const auto& stages = pc.estimate.stages;
      ASSERT_EQ(pc.costs.stages.size(), stages.size());
      for (size_t s = 0; s < stages.size(); ++s) {
        const plan::StageTime& st = stages[s];
        double tp = 0, cp = 0, ep = 0, zero3 = 0, host = 0, compute = 0;
        for (const ChunkCost& cc : pc.costs.stages[s].chunks) {
          tp += cc.tp_forward_s + cc.tp_backward_s;
          cp += cc.cp_forward_s + cc.cp_backward_s;
          ep += cc.ep_forward_s + cc.ep_backward_s;
          zero3 += cc.dp_forward_s + cc.dp_backward_s;
          host += cc.host_forward_s + cc.host_backward_s;
          compute += cc.forward_s + cc.backward_s;
        }
        const std::string at = "stage " + std::to_string(s) + " zero " + std::to_string(zero) + " " + to_string(schedule);
        const double tol = 1e-9 * st.total_s();
        EXPECT_NEAR(tp, st.tp_comm_s, tol) << at;
        EXPECT_NEAR(cp, st.cp_comm_s, tol) << at;
        EXPECT_NEAR(ep, st.ep_comm_s + st.ep_wait_s, tol) << at;
        EXPECT_GT(st.ep_comm_s, 0) << at;
        EXPECT_GT(st.ep_wait_s, 0) << at;
        EXPECT_NEAR(zero3, st.zero3_s, tol) << at;
        EXPECT_NEAR(host, st.host_s, tol) << at;
        // Everything the stage's time holds but its sends (played as messages); blocking sends
        // slow no pass.
        if (pc.costs.blocking_sends) EXPECT_NEAR(compute, st.total_s() - st.pp_comm_s, tol) << at;
      }
      // And the played step against the planner's (uniform stages: within a few percent).
      const SimResult r = simulate(build_schedule(run.exec.schedule, run.layout.pp, pc.micro_batches, pc.virtual_stages),
                                   pc.costs);
      EXPECT_NEAR(r.step_s / pc.estimate.time.step, 1.0, 0.05) << "zero " << zero << " " << to_string(schedule);
    }
}

}  // namespace trident::sim
