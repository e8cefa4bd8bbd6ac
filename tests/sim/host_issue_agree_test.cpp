// The simulator plays the planner's host issue floor (plan/host_issue.h): each stage waits for its
// host as long per micro-batch as the planner charges, in every schedule, and the step times
// agree as they do without the floor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/execution_spec.h"
#include "plan/estimate.h"
#include "schedule/schedule.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"
#include "../common/test_run.h"

namespace trident::sim {
namespace {

// A small MoE (Qwen3-30B's layer shape, 16 layers) at micro-batch 1 on B200: host-bound.
ModelSpec small_moe() {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.layers = 16;
  m.hidden = 2048;
  m.heads = 32;
  m.kv_heads = 4;
  m.experts = 128;
  m.experts_per_token = 8;
  m.expert_ffn_hidden = 768;
  m.ffn_hidden = 6144;
  m.seq_len = 4096;
  return m;
}

TEST(HostIssueAgree, simulator_plays_the_planners_host_floor_for_every_schedule) {
  int played = 0, bound = 0;
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::GPipe,
                            ScheduleKind::ZeroBubbleH1})
    for (int64_t pp : {1, 2, 4})
      for (bool graphs : {false, true}) {
        if (kind != ScheduleKind::OneFOneB && pp == 1) continue;
        RunSpec run = tests::run_on(small_moe(), "dgx-b200", 1, 1, pp, 8 / pp, "tp-ep-dp-pp");
        run.layout.ep = 8 / pp;
        apply_stack(*find_stack("megatron-core-te"), run.exec);
        run.exec.stack = "megatron-core-te";
        run.exec.schedule = kind;
        run.exec.virtual_stages = kind == ScheduleKind::Interleaved ? 2 : 1;
        run.exec.micro_batch_size = 1;
        run.exec.global_batch_size = 8 * (8 / pp);
        if (graphs) {
          run.exec.recipe.cuda_graphs = CudaGraphs::TransformerEngine;
          run.exec.recipe.cuda_graph_scopes.attn = true;
        }
        const std::string name = to_string(kind) + " pp " + std::to_string(pp) + (graphs ? " attn graphed" : "");
        const PlannedCosts pc = costs_from_plan(run);
        const plan::Estimate& e = pc.estimate;
        const SimResult r = simulate(build_schedule(kind, pp, pc.micro_batches, pc.virtual_stages), pc.costs);
        for (size_t s = 0; s < e.stages.size(); ++s) {
          const double planned = double(pc.micro_batches) * e.stages[s].host_s;
          EXPECT_NEAR(r.stages[s].host_wait_s, planned, 1e-9 * std::max(planned, 1e-9)) << name << " stage " << s;
        }
        bound += e.time.host > 0;
        EXPECT_NEAR(r.host_wait_s(), double(pc.micro_batches) * e.stages[size_t(r.critical_stage)].host_s, 1e-9) << name;
        // As without the floor (zero_phases_agree_test): within 5% plus the DP exposure, and the
        // bubble under ZB-H1 (the planner's closed form against the played order).
        const double allowed = 0.05 * e.time.step + e.dp.exposed_s +
                               (kind == ScheduleKind::ZeroBubbleH1 ? e.pipeline.bubble_s : 0.0);
        EXPECT_LE(std::abs(r.step_s - e.time.step), allowed)
            << name << ": simulated " << r.step_s << " s, planned " << e.time.step << " s";
        ++played;
      }
  std::printf("played %d runs, %d of them host-bound\n", played, bound);
  EXPECT_EQ(played, 18);
  EXPECT_GE(bound, played / 2);
}

}  // namespace
}  // namespace trident::sim
