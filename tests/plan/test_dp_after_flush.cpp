// The gradient reduction after the pipeline flush: DeepSpeed's pipeline engine
// (--dp-after-pipeline-flush, on in --stack deepspeed) and Megatron-LM 2021's local DDP
// (--stack megatron-lm-2021: no DP overlap). Nothing of the reduction is hidden at pp > 1; at
// pp 1 the flag changes nothing.
#include <gtest/gtest.h>

#include "core/run_spec.h"
#include "../common/test_run.h"
#include "plan/estimate.h"

using namespace trident;
using namespace trident::plan;

namespace {

OptionValues values(std::vector<std::pair<std::string, std::string>> kv) { return tests::planner_values(kv); }

// GPT-3 175B on 32 DGX A100 nodes: tp 8 x pp pp x dp, 1F1B, full recompute.
RunSpec gpt3(int64_t pp, int zero) {
  RunSpec run;
  run.model = model_preset("gpt3-175b");
  run.cluster = cluster_preset("dgx-a100-80g");
  run.cluster.nodes = 32;
  run.layout.tp = 8;
  run.layout.pp = pp;
  run.layout.dp = 256 / (8 * pp);
  run.layout.order = "tp-dp-pp";
  run.exec.global_batch_size = 256;
  run.exec.micro_batch_size = 1;
  run.exec.recompute = Recompute::Full;
  run.exec.zero = zero;
  return run;
}

}  // namespace

TEST(DpAfterFlush, a_pipelined_reduction_after_the_flush_hides_nothing) {
  for (int zero : {0, 1}) {
    RunSpec run = gpt3(8, zero);
    const Estimate behind = estimate(run, 0);
    run.exec.recipe.dp_after_pipeline_flush = true;
    const Estimate after = estimate(run, 0);
    // The same traffic; behind the last backward part of it was hidden, after the flush none.
    EXPECT_DOUBLE_EQ(after.dp.total_s, behind.dp.total_s) << zero;
    EXPECT_GT(behind.dp.hidden_s, 0) << zero;
    EXPECT_DOUBLE_EQ(after.dp.hidden_s, 0) << zero;
    EXPECT_DOUBLE_EQ(after.dp.exposed_s, after.dp.total_s) << zero;
    // The step grows by what was hidden, less the slowdown the hidden part cost.
    EXPECT_NEAR(after.time.step - behind.time.step, after.time.dp_comm - behind.time.dp_comm, 1e-9) << zero;
    EXPECT_GT(after.time.step, behind.time.step) << zero;
    // --overlap without dp is the same for the planner.
    run.exec.recipe.dp_after_pipeline_flush = false;
    run.exec.overlap.dp = false;
    EXPECT_DOUBLE_EQ(estimate(run, 0).time.step, after.time.step) << zero;
  }
}

TEST(DpAfterFlush, without_a_pipeline_the_flag_changes_nothing) {
  RunSpec run = gpt3(1, 1);
  run.model.layers = 8;  // fits at pp 1
  const Estimate plain = estimate(run, 0);
  run.exec.recipe.dp_after_pipeline_flush = true;
  const Estimate flagged = estimate(run, 0);
  EXPECT_GT(plain.dp.hidden_s, 0);
  EXPECT_DOUBLE_EQ(flagged.time.step, plain.time.step);
  EXPECT_DOUBLE_EQ(flagged.dp.hidden_s, plain.dp.hidden_s);
}

TEST(DpAfterFlush, the_stacks_that_reduce_after_the_flush_say_so) {
  for (const auto& s : stack_presets()) {
    ExecutionSpec x;
    apply_stack(s, x);
    EXPECT_EQ(x.recipe.dp_after_pipeline_flush, s.name == "deepspeed") << s.name;
    // Megatron-LM's local DDP all-reduced after forward_backward_func returned, pp or not.
    if (s.name == "megatron-lm-2021") EXPECT_FALSE(x.overlap.dp);
    EXPECT_EQ(dp_overlapped(x, 1), s.name != "megatron-lm-2021") << s.name;
    EXPECT_EQ(dp_overlapped(x, 2), s.name != "megatron-lm-2021" && s.name != "deepspeed") << s.name;
  }
  Problems p;
  EXPECT_FALSE(resolve_execution(values({{"stack", "deepspeed"}, {"dp-after-pipeline-flush", "false"}}), p)
                   .recipe.dp_after_pipeline_flush);  // an explicit flag wins
  EXPECT_TRUE(resolve_execution(values({{"dp-after-pipeline-flush", "true"}}), p).recipe.dp_after_pipeline_flush);
  ASSERT_TRUE(p.empty());
}
