// The kernel-launch term: kernel calls counted per layer and pass from the layer's structure,
// each costing kernel_launch_us, added to the compute of every pass (recompute included).
#include <gtest/gtest.h>

#include "plan/estimate.h"
#include "plan/kernel_calls.h"

using namespace trident;
using namespace trident::plan;

namespace {

RunSpec small_gpt_at_tp8(double launch_us) {
  RunSpec run;
  run.model = {"gpt-1.3b", ModelFamily::GPT, 24, 2048, 16, 16, 4 * 2048, 2048, 51200};
  run.cluster = cluster_preset("dgx-a100-80g");
  run.cluster.nodes = 1;
  run.layout = Layout{8, 1, 1, 1, "tp-dp-pp"};
  run.exec.global_batch_size = 16;
  run.exec.micro_batch_size = 1;
  run.exec.attention = AttentionKind::Flash;
  run.exec.sequence_parallel = true;
  run.cost = builtin_cost(run.cluster.gpu);
  run.cost->kernel_launch_us = launch_us;
  return run;
}

}  // namespace

TEST(KernelCalls, a_gpt_layer_counts_its_kernels_by_kind) {
  ModelSpec m = small_gpt_at_tp8(0).model;
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.sequence_parallel = true;
  const KernelCalls k = layer_kernel_calls(m, e, 8, 1);
  // QKV, projection, MLP in and out; one fused attention kernel; 2 norms, GELU, 2 bias-dropout-adds;
  // 2 all-gathers and 2 reduce-scatters of sequence parallelism.
  EXPECT_EQ(k.forward.gemms, 4);
  EXPECT_EQ(k.forward.attention, 1);
  EXPECT_EQ(k.forward.elementwise, 5);
  EXPECT_EQ(k.forward.collectives, 4);
  EXPECT_EQ(k.forward.total(), 14);
  // dgrad and wgrad each, the fused backward and its preprocessing.
  EXPECT_EQ(k.backward.total(), 8 + 2 + 5 + 4);
  EXPECT_EQ(k.recompute.total(), 0);
  e.recompute = Recompute::Full;
  EXPECT_EQ(layer_kernel_calls(m, e, 8, 1).recompute.total(), 14);  // the forward again
  e.recompute = Recompute::None;
  e.attention = AttentionKind::Unfused;
  e.sequence_parallel = false;
  e.precision = Precision::FP8;
  m.family = ModelFamily::Llama;
  const KernelCalls u = layer_kernel_calls(m, e, 8, 1);
  EXPECT_EQ(u.forward.attention, 4);    // QK^T, softmax, dropout, scores x V
  EXPECT_EQ(u.forward.elementwise, 6);  // and the rotary embedding
  EXPECT_EQ(u.forward.collectives, 2);  // two all-reduces
  EXPECT_EQ(u.forward.casts, 4);
  EXPECT_EQ(u.backward.attention, 6);
  EXPECT_EQ(layer_kernel_calls(m, e, 1, 1).forward.collectives, 0);
}

TEST(KernelCalls, each_call_adds_its_fixed_cost_to_the_step) {
  const double us = 7;
  const Estimate without = estimate(small_gpt_at_tp8(0), 0);
  const Estimate with = estimate(small_gpt_at_tp8(us), 0);
  EXPECT_EQ(without.time.launch, 0);
  // One stage holds everything: 24 layers x (14 forward + 19 backward) + embedding + logits calls.
  const int64_t calls = 24 * (14 + 19) + kEmbeddingKernels + kLogitsKernels;
  ASSERT_EQ(with.stages.size(), 1u);
  EXPECT_EQ(with.stages[0].kernel_calls, calls);
  const double m = double(with.micro_batches);
  EXPECT_NEAR(with.time.launch, m * double(calls) * us * 1e-6, 1e-12);
  // The term is part of the compute, and nothing else moved (no pipeline, no DP to re-hide).
  EXPECT_NEAR(with.time.compute - without.time.compute, with.time.launch, 1e-9);
  EXPECT_NEAR(with.time.step - without.time.step, with.time.launch, 1e-9);
}

TEST(KernelCalls, full_recomputation_runs_the_forward_kernels_again) {
  RunSpec a = small_gpt_at_tp8(5), b = a;
  b.exec.recompute = Recompute::Full;
  const Estimate ea = estimate(a, 0), eb = estimate(b, 0);
  EXPECT_EQ(eb.stages[0].kernel_calls - ea.stages[0].kernel_calls, 24 * 14);
}
