// Pipeline sends against hand computations: each TP rank's s/tp rows under sequence parallel,
// without it Megatron-LM's 1/tp share (scatter/gather: no stack named, or megatron-lm-2021) or the
// whole tensor (--pipeline-sends-whole-tensor, every other stack), the step term they make,
// and the deepspeed stack's one schedule (1F1B: interleaved and zb-h1 refused, the search keeps it).
#include <gtest/gtest.h>

#include "core/run_spec.h"
#include "../common/test_run.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/search.h"

using namespace trident;
using namespace trident::plan;

namespace {

OptionValues values(std::vector<std::pair<std::string, std::string>> kv) { return tests::planner_values(kv); }

// BLOOM 176B's layout on 48 DGX A100 nodes: tp 4 x pp 12 x dp 8, micro-batch 2, 1F1B.
RunSpec bloom_layout() {
  RunSpec run;
  run.model = {"bloom-176b", ModelFamily::GPT, 70, 14336, 112, 112, 4 * 14336, 2048, 250880};
  run.cluster = cluster_preset("dgx-a100-80g");
  run.cluster.nodes = 48;
  run.layout.tp = 4;
  run.layout.pp = 12;
  run.layout.dp = 8;
  run.layout.order = "tp-dp-pp";
  run.exec.global_batch_size = 2048;
  run.exec.micro_batch_size = 2;
  run.exec.recompute = Recompute::Full;
  run.exec.zero = 1;
  return run;
}

}  // namespace

TEST(PipelineSends, megatron_sends_a_tp_share_deepspeed_the_whole_tensor) {
  // GPT-3 175B, b 1, s 2048, h 12288, bf16, tp 8, on a 25 GB/s link at 80% with 5 us latency.
  ModelSpec m;
  m.layers = 96, m.hidden = 12288, m.heads = 96, m.kv_heads = 96, m.ffn_hidden = 4 * 12288;
  m.seq_len = 2048, m.vocab = 51200;
  GroupLink ib;
  ib.kind = LinkKind::InfiniBand;
  ib.bandwidth_Bps = 25e9;
  ib.latency_s = 5e-6;
  ib.nodes = 2;
  CostConstants c;
  c.network_efficiency = 0.8;
  ExecutionSpec e;
  e.sequence_parallel = true;  // each rank's own s/t rows: no gather on the receiver
  const GroupLink nvlink{LinkKind::NVLink, 300e9, 3e-6};
  // By hand: 2048 x 12288 x 2 B = 50,331,648 B; / 8 = 6,291,456 B; at 20 GB/s 314.5728 us + 5 us.
  const PpComm share = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  EXPECT_DOUBLE_EQ(share.activation_bytes, 50331648.0);
  EXPECT_EQ(share.split, 8);
  EXPECT_DOUBLE_EQ(share.message_bytes, 6291456.0);
  EXPECT_NEAR(share.message_s, 319.5728e-6, 1e-12);
  // Under sequence parallel every stack sends those rows, whole-tensor sends or not.
  e.recipe.pipeline_sends_whole_tensor = false;
  EXPECT_EQ(pp_comm_per_message(m, e, 8, ib, nvlink, c).message_bytes, share.message_bytes);
  // Without it, the whole tensor: 50,331,648 B at 20 GB/s = 2516.5824 us + 5 us, eight times the bytes.
  e.sequence_parallel = false;
  e.recipe.pipeline_sends_whole_tensor = true;
  const PpComm whole = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  EXPECT_EQ(whole.split, 1);
  EXPECT_DOUBLE_EQ(whole.message_bytes, 50331648.0);
  EXPECT_NEAR(whole.message_s, 2521.5824e-6, 1e-12);
}

TEST(PipelineSends, the_step_carries_two_blocking_sends_per_micro_batch_of_the_whole_tensor) {
  RunSpec run = bloom_layout();
  run.exec.recipe.pipeline_sends_whole_tensor = false;  // Megatron-LM's scatter/gather
  const Estimate share = estimate(run, 0);
  run.exec.recipe.pipeline_sends_whole_tensor = true;
  const Estimate whole = estimate(run, 0);
  // b 2 x s 2048 x h 14336 x 2 B = 117,440,512 B, sent whole by each of the 4 TP ranks.
  EXPECT_DOUBLE_EQ(whole.pp_message.message_bytes, 117440512.0);
  EXPECT_DOUBLE_EQ(share.pp_message.message_bytes, 117440512.0 / 4);
  // 1F1B without pp overlap: every stage blocks on 2 sends per micro-batch, 128 micro-batches.
  EXPECT_EQ(whole.micro_batches, 128);
  EXPECT_NEAR(whole.time.pp_comm, 128 * 2 * whole.pp_message.message_s, 1e-9);
  EXPECT_NEAR(share.time.pp_comm, 128 * 2 * share.pp_message.message_s, 1e-9);
  // 4x the bytes on the wire (latency once per send); the shares, without sequence parallel, also
  // wait for the receiver's all-gather on NVLink, which the whole tensor does not need.
  EXPECT_GT(whole.pp_message.wire_s, 3.5 * share.pp_message.wire_s);
  EXPECT_GT(share.pp_message.gather_s, 0.0);
  EXPECT_EQ(whole.pp_message.gather_s, 0.0);
  EXPECT_GT(whole.time.pp_comm, 2 * share.time.pp_comm);
  EXPECT_NEAR(whole.time.step - share.time.step,
              (whole.time.pp_comm - share.time.pp_comm) + (whole.time.bubble - share.time.bubble), 1e-9);
}

TEST(PipelineSends, the_deepspeed_stack_sends_whole_tensors_and_runs_1f1b_only) {
  Problems p;
  ExecutionSpec e = resolve_execution(values({{"stack", "deepspeed"}}), p);
  ASSERT_TRUE(p.empty()) << p.list().front().what;
  EXPECT_TRUE(e.recipe.pipeline_sends_whole_tensor);
  EXPECT_EQ(e.schedule, ScheduleKind::OneFOneB);
  EXPECT_FALSE(e.overlap.tp);
  e = resolve_execution(values({{"stack", "deepspeed"}, {"pipeline-sends-whole-tensor", "false"}}), p);
  EXPECT_FALSE(e.recipe.pipeline_sends_whole_tensor);  // an explicit flag wins
  e = resolve_execution(values({{"stack", "megatron-core-te"}}), p);  // every stack but Megatron-LM 2021
  EXPECT_TRUE(e.recipe.pipeline_sends_whole_tensor);
  e = resolve_execution(values({}), p);  // no stack named: Megatron-LM's scatter/gather
  EXPECT_FALSE(e.recipe.pipeline_sends_whole_tensor);
  e = resolve_execution(values({{"stack", "megatron-lm-2021"}}), p);
  EXPECT_FALSE(e.recipe.pipeline_sends_whole_tensor);
  e = resolve_execution(values({{"stack", "megatron-lm-2021"}, {"pipeline-sends-whole-tensor", "true"}}), p);
  EXPECT_TRUE(e.recipe.pipeline_sends_whole_tensor);
  ASSERT_TRUE(p.empty());
  for (const char* schedule : {"interleaved", "zb-h1"}) {
    Problems bad;
    resolve_execution(values({{"stack", "deepspeed"}, {"schedule", schedule}}), bad);
    ASSERT_EQ(bad.list().size(), 1u) << schedule;
    const std::string what = bad.list()[0].what;
    EXPECT_NE(what.find("--stack deepspeed"), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("--schedule ") + schedule), std::string::npos) << what;
    EXPECT_NE(bad.list()[0].fix.find("--schedule 1f1b"), std::string::npos) << bad.list()[0].fix;
  }
  Problems ok;
  resolve_execution(values({{"stack", "megatron-core-te"}, {"schedule", "interleaved"}}), ok);
  EXPECT_TRUE(ok.empty());
}

TEST(PipelineSends, the_search_with_the_deepspeed_stack_tries_1f1b_alone) {
  RunSpec run = bloom_layout();
  Problems p;
  run.exec = resolve_execution(values({{"stack", "deepspeed"}}), p);
  run.exec.global_batch_size = 2048;
  SearchSpace space;
  space.use_stack(run.exec);
  EXPECT_EQ(space.stack_schedules, std::vector<ScheduleKind>{ScheduleKind::OneFOneB});
  // Megatron: 1F1B and interleaved (no GPipe, no zero-bubble schedule).
  SearchSpace megatron;
  run.exec = resolve_execution(values({{"stack", "megatron-core-te"}}), p);
  megatron.use_stack(run.exec);
  EXPECT_FALSE(megatron.schedule.has_value());
  EXPECT_EQ(megatron.stack_schedules, (std::vector<ScheduleKind>{ScheduleKind::OneFOneB, ScheduleKind::Interleaved}));
}
