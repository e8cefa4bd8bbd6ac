// The MoE layer's fixed costs (plan/mixture_of_experts.h, plan/kernel_calls.h): the experts'
// GEMMs on a roofline (few rows: bound by reading the experts' weights from HBM), the router's
// score function and top-k as memory-bound bytes, one GEMM launch per local expert.
#include <gtest/gtest.h>

#include "plan/cost_model.h"
#include "plan/kernel_calls.h"
#include "plan/mixture_of_experts.h"

using namespace trident;
using namespace trident::plan;

namespace {
// Qwen3-30B-A3B's MoE layer: 128 experts of width 768, top-8, hidden 2048 (SwiGLU).
ModelSpec qwen3_30b_like() {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.hidden = 2048;
  m.experts = 128;
  m.experts_per_token = 8;
  m.expert_ffn_hidden = 768;
  m.ffn_hidden = 6144;
  m.shared_experts = 0;
  m.moe_dense_layers = 0;
  return m;
}
}  // namespace

// One token per GPU at ep 8: 16 local experts get 16 x 1 x 8 x 8 / 128 = 0.5 rows each; their
// GEMMs are bound by the 16 x 3 x 2048 x 768 bf16 weights read from HBM, not by the tensor
// cores. At 4096 tokens (2048 rows per expert) the compute time wins. (The old model charged
// 2 m k n / peak only: a micro-second for the one token.)
TEST(MoeCompute, few_rows_per_expert_are_bound_by_reading_the_weights) {
  const ModelSpec m = qwen3_30b_like();
  const CostConstants& c = default_constants();
  const double peak = 1e15, eff = 0.5, hbm = 4e12, h = 2048, fe = 768;
  const MoeCompute one = moe_compute(m, 1, 1, 8, peak, eff, c, 1, hbm, 2, 2);
  EXPECT_EQ(one.local_experts, 16);
  EXPECT_DOUBLE_EQ(one.tokens_per_expert, 0.5);
  const double weights = 16 * (h * 2 * fe + fe * h) * 2;
  EXPECT_DOUBLE_EQ(one.expert_weight_bytes, weights);
  const double rows = 16 * 0.5 * ((h + 2 * fe) + (fe + h)) * 2;  // rows in and out of both GEMMs
  EXPECT_NEAR(one.routed_memory_s, (weights + rows) / hbm, 1e-15);
  EXPECT_TRUE(one.routed_memory_bound);
  EXPECT_NEAR(one.routed_s, one.routed_memory_s, 1e-15);
  EXPECT_GT(one.routed_s, 2 * one.routed_compute_s);  // even against the GEMM curve's small-m efficiency
  const MoeCompute many = moe_compute(m, 4096, 1, 8, peak, eff, c, 1, hbm, 2, 2);
  EXPECT_FALSE(many.routed_memory_bound);
  EXPECT_DOUBLE_EQ(many.routed_s, many.routed_compute_s);
  // Per token the small micro-batch costs far more: what the old model, linear in tokens, missed.
  EXPECT_GT(one.routed_s / 1, 100 * many.routed_s / 4096);
}

// Softmax (or sigmoid) and top-k over T / tp x E fp32 logits: 3 x 4 bytes per logit and 12
// bytes per chosen expert (fp32 weight, int64 index), at the HBM rate given.
TEST(MoeCompute, router_scores_are_memory_bound_bytes_by_hand) {
  const ModelSpec m = qwen3_30b_like();
  const MoeCompute mc = moe_compute(m, 4096, 2, 8, 1e15, 0.5, default_constants(), 1, 4e12, 2, 2);
  const double own = 4096 / 2.0;
  EXPECT_DOUBLE_EQ(mc.router_score_bytes, own * (3 * 4 * 128 + 12 * 8));
  EXPECT_DOUBLE_EQ(mc.router_score_s, mc.router_score_bytes / 4e12);
  EXPECT_DOUBLE_EQ(mc.score_s, mc.router_score_s);  // every layer a MoE layer
}

// layer_compute charges the scores among the memory-bound kernels and its GEMMs at the roofline:
// on a B200 with FP8, 1 token per micro-batch. The planner's forward and the simulator's (which
// play lc.forward_s()) see them alike.
TEST(MoeCompute, layer_compute_carries_the_roofline_and_the_scores) {
  ModelSpec m = qwen3_30b_like();
  m.seq_len = 1;
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.global_batch_size = 8;
  e.precision = Precision::FP8;
  const GpuSpec gpu = gpu_preset("b200-180g");
  const CostConstants c = builtin_cost(gpu);
  const LayerCompute lc = layer_compute(m, e, 1, gpu, c, 1, 8, 1);
  const MoeCompute mc = layer_moe_compute(m, e, 1, gpu, c, 8, 1);
  EXPECT_TRUE(mc.routed_memory_bound);
  EXPECT_DOUBLE_EQ(mc.expert_weight_bytes, 16.0 * 3 * 2048 * 768);  // FP8: one byte per weight
  EXPECT_DOUBLE_EQ(lc.moe_routed_s, mc.routed_s);
  EXPECT_DOUBLE_EQ(lc.moe_score_s, mc.router_score_s);
  EXPECT_GE(lc.elementwise_s, mc.router_score_s);
  EXPECT_GE(lc.forward_s(), mc.routed_memory_s);
}

// Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) launches one cuBLAS GEMM per
// local expert for the experts' input and output: 16 local experts at ep 8 are 32 GEMM calls,
// plus QKV, the projection and the router; backward twice that. The router's score function and
// top-k, the permute and the unpermute are four more elementwise kernels. (Old count: 5 GEMMs.)
TEST(MoeCompute, kernel_calls_count_one_gemm_per_local_expert) {
  const ModelSpec m = qwen3_30b_like();
  ExecutionSpec e;
  const KernelCalls k8 = layer_kernel_calls(m, e, 1, 1, 8);
  EXPECT_EQ(k8.forward.gemms, 2 + 1 + 2 * 16);
  EXPECT_EQ(k8.backward.gemms, 2 * k8.forward.gemms);
  EXPECT_EQ(layer_kernel_calls(m, e, 1, 1, 128).forward.gemms, 2 + 1 + 2);
  ModelSpec shared = m;
  shared.shared_experts = 1;
  EXPECT_EQ(layer_kernel_calls(shared, e, 1, 1, 8).forward.gemms, 2 + 1 + 2 * 16 + 2);
  const KernelCalls dense = layer_kernel_calls(model_preset("llama3-8b"), e, 1, 1, 1);
  EXPECT_EQ(k8.forward.elementwise, dense.forward.elementwise + 4);
}
