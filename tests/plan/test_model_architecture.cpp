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

namespace {

// DeepSeek-V3's multi-head latent attention on a dense layer.
ModelSpec mla_like() {
  ModelSpec m;
  m.family = ModelFamily::Llama;
  m.layers = 2;
  m.hidden = 7168;
  m.heads = 128;
  m.kv_heads = 128;
  m.ffn_hidden = 18432;
  m.seq_len = 4096;
  m.vocab = 129280;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  return m;
}

}  // namespace

TEST(ModelArchitecture, mla_gemms_split_the_up_projections_over_tp_and_keep_the_down_ones_whole) {
  const ModelSpec m = mla_like();
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  GpuSpec gpu{"x", 80.0 * (1ull << 30), 989e12, 67e12, 3.35e12};
  CostConstants c;
  const double T = 4096, h = 7168, H = 128, t = 4, f = 18432;
  const LayerCompute lc = layer_compute(m, e, 4, gpu, c);
  const double attention = h * 1536 + 1536 * H * 192 / t + h * (512 + 64) + 512 * H * (128 + 128) / t + H * 128 / t * h;
  EXPECT_NEAR(lc.gemm_flops / (2 * T * (attention + h * 3 * f / t)), 1.0, 1e-12);
  // Scores over 192 features per head, values of 128: 2 s^2 (192 + 128) per head of this GPU.
  EXPECT_NEAR(lc.attention_flops / (2 * (H / t) * T * T * (192 + 128)), 1.0, 1e-12);
  // K and V together (a KV block, a cache): heads x (192 + 128) per token.
  EXPECT_EQ(2 * m.kv_dim(), 128 * (192 + 128));
}

TEST(ModelArchitecture, mla_model_flops_use_the_matrices_the_parameter_count_holds) {
  const ModelSpec m = mla_like();
  const ParamCount pc = count_parameters(m);
  // The attention's matrices: its parameters less the two latent RMSNorm weights.
  const double matrices = double(pc.attention_per_layer - 1536 - 512) + 3.0 * 7168 * 18432;
  const double s = 4096, B = 2;
  const double per_layer = 2 * s * matrices + 2 * s * s * 128 * (192 + 128);
  EXPECT_NEAR(model_flops_per_step(m, 2, 129280) / (3 * B * (2 * per_layer + 2 * s * 7168 * 129280.0)), 1.0, 1e-12);
}

TEST(ModelArchitecture, sliding_windows_take_the_share_of_keys_attended) {
  ModelSpec m = qwen3_like(128);
  m.sliding_window = 128;
  m.full_attention_every = 2;  // GPT-OSS: layers 0, 2 windowed, 1, 3 full
  const double s = 4096, w = 128;
  const double windowed = (w * (w + 1) / 2 + (s - w) * w) / s / ((s + 1) / 2);
  EXPECT_NEAR(m.attended_key_share(), (windowed + 1) / 2, 1e-12);
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  GpuSpec gpu{"x", 80.0 * (1ull << 30), 989e12, 67e12, 3.35e12};
  CostConstants c;
  const double full = layer_compute(qwen3_like(128), e, 1, gpu, c).attention_flops;
  EXPECT_NEAR(layer_compute(m, e, 1, gpu, c).attention_flops / full, (windowed + 1) / 2, 1e-12);
  m.sliding_window = 8192;  // longer than the sequence: every key
  EXPECT_EQ(m.attended_key_share(), 1.0);
}

TEST(ModelArchitecture, mtp_modules_sit_on_the_last_stage) {
  ModelSpec m = mla_like();
  const int64_t tp = 2;
  const StageParams without = stage_params(m, tp, 4, 1, false, true);
  m.mtp_layers = 1;
  const ParamCount pc = count_parameters(m);
  const StageParams last = stage_params(m, tp, 4, 1, false, true);
  const StageParams middle = stage_params(m, tp, 4, 1, false, false);
  const double h = 7168;
  // One layer's matrices split over tp, its norms whole, the 2h -> h projection and three norms.
  EXPECT_NEAR(last.total() - without.total(),
              double(pc.attention_per_layer + pc.mlp_per_layer) / tp + double(pc.norms_per_layer) + 2 * h * h / tp + 3 * h,
              1e-3);
  EXPECT_EQ(middle.output_params, 0.0);
  // Not in the model's total (as DeepSeek counts 671B), counted apart.
  EXPECT_GT(pc.mtp, 0);
}
