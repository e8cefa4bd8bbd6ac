// The architecture fields of the model description in the planner's formulas: a head width of
// the model's own (Qwen3: 32 heads x 128 on hidden 2048) sizes Q, the projection and the
// attention scores, not hidden / heads.
#include <gtest/gtest.h>

#include "core/cluster_spec.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"

using namespace trident;
using namespace trident::plan;

namespace {

// Qwen3-30B-A3B's attention on a dense Llama layer: hidden 2048, 32 heads of 128, 4 kv heads.
ModelSpec qwen3_like(int64_t head_size) {
  ModelSpec m;
  m.family = ModelFamily::Llama;
  m.layers = 4;
  m.hidden = 2048;
  m.heads = 32;
  m.kv_heads = 4;
  m.head_size = head_size;
  m.ffn_hidden = 6144;
  m.seq_len = 4096;
  m.vocab = 151936;
  return m;
}

}  // namespace

TEST(ModelArchitecture, model_flops_take_the_models_head_dim) {
  const ModelSpec m = qwen3_like(128);
  const double s = 4096, h = 2048, q = 32 * 128, kv = 4 * 128, f = 6144, L = 4, V = 151936, B = 8;
  // Per token and layer forward: 2 x the matrices (Q, K, V, projection, SwiGLU) + 4 s q for the
  // scores and their product with V (not causal-halved); the logits 2 h V; x 3 for the backward.
  const double per_layer = 2 * s * (h * (q + 2 * kv) + q * h + 3 * h * f) + 4 * s * s * q;
  const double want = 3 * B * (L * per_layer + 2 * s * h * V);
  EXPECT_NEAR(model_flops_per_step(m, 8, 151936) / want, 1.0, 1e-12);
  // hidden / heads would be 64: a different, smaller model.
  EXPECT_LT(model_flops_per_step(qwen3_like(0), 8, 151936), 0.9 * want);
}

TEST(ModelArchitecture, layer_gemms_and_attention_take_the_models_head_dim) {
  const ModelSpec m = qwen3_like(128);
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.attention = AttentionKind::Flash;
  GpuSpec gpu{"x", 80.0 * (1ull << 30), 989e12, 67e12, 3.35e12};
  CostConstants c;
  const int64_t tp = 2;
  const LayerCompute lc = layer_compute(m, e, tp, gpu, c);
  const double T = 4096, h = 2048, q = 4096, kv = 512, f = 6144, t = tp;
  EXPECT_NEAR(lc.gemm_flops / (2 * T * h * ((q + 2 * kv) / t + q / t + 2 * f / t + f / t)), 1.0, 1e-12);
  // Scores: per head of this GPU, 4 s^2 d with d = 128.
  EXPECT_NEAR(lc.attention_flops / (4 * 32.0 / t * T * T * 128), 1.0, 1e-12);
}

TEST(ModelArchitecture, stored_activations_hold_q_and_the_projection_input_at_heads_x_head_dim) {
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.attention = AttentionKind::Flash;
  e.precision = Precision::BF16;
  const double sb = 4096;
  const double own = layer_activations(qwen3_like(128), e, 1).bytes;
  const double derived = layer_activations(qwen3_like(0), e, 1).bytes;
  // Q and the projection input (2 bytes each per element) grow from h = 2048 to 4096 features,
  // K and V (2 bytes each) from 4 x 64 to 4 x 128.
  EXPECT_NEAR(own - derived, 2 * sb * (4096 - 2048) * 2 + 2 * sb * (512 - 256) * 2, 1e-6);
}
