// A --pipeline-layout (Megatron-Core's --pipeline-model-parallel-layout) moves layers between
// the pipeline's chunks for the planner and the simulator alike: the planner's stages hold the
// layout's layers, the simulated step follows the planned one, and moving layers off the last
// stage (which also runs the output layer, the loss and the MTP module) shortens both by as much.
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

// A small DeepSeek-V3-like MoE: 8 layers with its expert shapes and one MTP module.
ModelSpec small_mtp_moe() {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.layers = 8;
  m.hidden = 7168;
  m.experts = 64;
  m.experts_per_token = 8;
  m.expert_ffn_hidden = 2048;
  m.mtp_layers = 1;
  m.seq_len = 4096;
  m.vocab = 129280;
  return m;
}

TEST(PipelineLayoutAgree, planner_and_simulator_split_the_layers_as_the_layout_says) {
  struct Case {
    ScheduleKind kind;
    int64_t pp, v;
    const char* layout;
    std::vector<int64_t> stages;
  };
  // Even split: 2 2 2 2 (1f1b) and 4 4 (interleaved, chunks 2 2 | 2 2); the layouts take layers off the last stage.
  for (const Case& k : {Case{ScheduleKind::OneFOneB, 4, 1, "Et*3|t*2|t*2|tmL", {3, 2, 2, 1}},
                        Case{ScheduleKind::Interleaved, 2, 2, "Et*2,|t*2|t*3|tmL", {5, 3}}}) {
    double step[2][2] = {};  // [layout?][planned, simulated]
    for (bool with_layout : {false, true}) {
      RunSpec run = tests::run_on(small_mtp_moe(), "dgx-b200", 1, 1, k.pp, 8 / k.pp, "tp-ep-dp-pp");
      run.layout.ep = 8 / k.pp;
      apply_stack(*find_stack("megatron-core-te"), run.exec);
      run.exec.stack = "megatron-core-te";
      run.exec.schedule = k.kind;
      run.exec.virtual_stages = k.v;
      run.exec.micro_batch_size = 1;
      run.exec.global_batch_size = 8 * (8 / k.pp);
      Problems syntax;
      if (with_layout) run.exec.pipeline_layout = parse_pipeline_layout(k.layout, syntax);
      ASSERT_TRUE(syntax.empty());
      Problems shape;
      check_run(run, true, shape);
      ASSERT_TRUE(shape.empty()) << shape.list().front().what;
      const PlannedCosts pc = costs_from_plan(run);
      const plan::Estimate& e = pc.estimate;
      if (with_layout)
        for (size_t s = 0; s < k.stages.size(); ++s) EXPECT_EQ(e.stages[s].layers, k.stages[s]) << k.layout << " stage " << s;
      const SimResult r = simulate(build_schedule(k.kind, k.pp, pc.micro_batches, pc.virtual_stages), pc.costs);
      step[with_layout][0] = e.time.step;
      step[with_layout][1] = r.step_s;
      EXPECT_LE(std::abs(r.step_s - e.time.step), 0.05 * e.time.step + e.dp.exposed_s) << k.layout << " " << with_layout;
    }
    // The last stage (output layer, loss, MTP) paces the even split: the layout is faster, in both.
    const double planned = step[0][0] - step[1][0], simulated = step[0][1] - step[1][1];
    EXPECT_GT(planned, 0.05 * step[0][0]) << k.layout;
    EXPECT_NEAR(simulated, planned, 0.25 * planned) << k.layout;
  }
}

}  // namespace
}  // namespace trident::sim
