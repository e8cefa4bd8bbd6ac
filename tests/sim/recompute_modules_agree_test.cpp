// The simulator plays the planner's --recompute-modules reruns (plan/recompute_modules.h): each
// chunk's backward carries its layers' module recompute, and the simulated step grows by what the
// planner charges, in every schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "core/execution_spec.h"
#include "plan/estimate.h"
#include "schedule/schedule.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"
#include "../common/test_run.h"

namespace trident::sim {
namespace {

// A small MoE with MLA (DeepSeek-V3's attention and expert shapes, 8 layers, 64 experts).
ModelSpec small_mla_moe() {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.layers = 8;
  m.hidden = 7168;
  m.heads = 128;
  m.kv_heads = 128;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  m.experts = 64;
  m.experts_per_token = 8;
  m.expert_ffn_hidden = 2048;
  m.ffn_hidden = 18432;
  m.seq_len = 4096;
  return m;
}

TEST(RecomputeModulesAgree, simulator_plays_the_planners_module_recompute_for_every_schedule) {
  int played = 0;
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::GPipe,
                            ScheduleKind::ZeroBubbleH1})
    for (int64_t pp : {1, 2, 4}) {
      if (kind != ScheduleKind::OneFOneB && pp == 1) continue;
      double step[2][2] = {};  // [modules?][planned, simulated]
      double planned_rerun = 0;
      for (bool modules : {false, true}) {
        RunSpec run = tests::run_on(small_mla_moe(), "dgx-b200", 1, 1, pp, 8 / pp, "tp-ep-dp-pp");
        run.layout.ep = 8 / pp;
        apply_stack(*find_stack("megatron-core-te"), run.exec);
        run.exec.stack = "megatron-core-te";
        run.exec.schedule = kind;
        run.exec.virtual_stages = kind == ScheduleKind::Interleaved ? 2 : 1;
        run.exec.micro_batch_size = 1;
        run.exec.global_batch_size = 4 * (8 / pp);
        run.exec.recompute = modules ? Recompute::Selective : Recompute::None;
        if (modules) run.exec.recompute_modules = {.mla_up_proj = true, .moe_act = true, .layernorm = true};
        const PlannedCosts pc = costs_from_plan(run);
        const plan::Estimate& e = pc.estimate;
        const SimResult r = simulate(build_schedule(kind, pp, pc.micro_batches, pc.virtual_stages), pc.costs);
        step[modules][0] = e.time.step;
        step[modules][1] = r.step_s;
        if (modules) {
          planned_rerun = double(pc.micro_batches) * e.stages[0].recompute_s;
          EXPECT_GT(e.stages[0].recompute_s, 0) << to_string(kind) << " pp " << pp;
        }
        const double allowed = 0.05 * e.time.step + e.dp.exposed_s +
                               (kind == ScheduleKind::ZeroBubbleH1 ? e.pipeline.bubble_s : 0.0);
        EXPECT_LE(std::abs(r.step_s - e.time.step), allowed) << to_string(kind) << " pp " << pp << " modules " << modules;
      }
      // The rerun lengthens the simulated step as the planned one, at least the first stage's
      // m x per micro-batch rerun (the pipeline adds the fill's share).
      const double planned = step[1][0] - step[0][0], simulated = step[1][1] - step[0][1];
      EXPECT_GE(simulated, 0.9 * planned_rerun) << to_string(kind) << " pp " << pp;
      EXPECT_NEAR(simulated, planned, 0.1 * planned + 0.02 * step[1][0]) << to_string(kind) << " pp " << pp;
      ++played;
    }
  EXPECT_EQ(played, 9);
}

}  // namespace
}  // namespace trident::sim
