// Megatron-Core's fine-grained selective recompute (--recompute-modules): what each module drops from
// a layer's stored activations and what its rerun costs, against the formulas worked by hand.
#include <gtest/gtest.h>

#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/memory_model.h"

using namespace trident;
using namespace trident::plan;

namespace {

// DeepSeek-V3's attention (MLA) on a dense layer: h 7168, 128 heads, q latent 1536, kv latent 512,
// heads of 128 + 64 (rope) query / key features and 128 value features; s 4096.
ModelSpec mla() {
  ModelSpec m;
  m.name = "mla";
  m.family = ModelFamily::Llama;
  m.layers = 4;
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

ExecutionSpec selective(RecomputeModules r, Precision p = Precision::BF16) {
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.recompute = Recompute::Selective;
  e.recompute_modules = r;
  e.precision = p;
  return e;
}

ExecutionSpec plain(Precision p = Precision::BF16) {
  ExecutionSpec e = selective({}, p);
  e.recompute = Recompute::None;
  return e;
}

}  // namespace

TEST(RecomputeModules, mla_up_proj_drops_q_k_and_v) {
  // Q 128 x 192, K 128 x 192, V 128 x 128 per token, 2 bytes, split over tp 2.
  const double expected = 4096.0 * 2 * (128 * 192 + 128 * 192 + 128 * 128) / 2;  // 256 MiB
  const double none = layer_activations(mla(), plain(), 2).bytes;
  EXPECT_DOUBLE_EQ(none - layer_activations(mla(), selective({.mla_up_proj = true}), 2).bytes, expected);
  EXPECT_DOUBLE_EQ(expected, 256.0 * (1 << 20));
}

TEST(RecomputeModules, moe_act_drops_the_experts_fc2_input_as_held) {
  ModelSpec m = model_preset("mixtral-8x7b");  // h 4096, 8 experts of 14336, top-2
  m.seq_len = 4096;
  // tp 1: the T k = 4096 x 2 routed copies' activation output, 14336 wide: 2 bytes in bf16, the
  // MXFP8 columnwise copy (1 + 1/32 byte) FC2 keeps under MXFP8 GEMMs.
  const double rows = 4096.0 * 2, width = 14336;
  EXPECT_DOUBLE_EQ(layer_activations(m, plain(), 1).bytes - layer_activations(m, selective({.moe_act = true}), 1).bytes,
                   2 * rows * width);
  const LayerActivations none = layer_activations(m, plain(Precision::MXFP8), 1);
  const LayerActivations act = layer_activations(m, selective({.moe_act = true}, Precision::MXFP8), 1);
  EXPECT_DOUBLE_EQ(none.bytes - act.bytes, 1.03125 * rows * width);
  EXPECT_DOUBLE_EQ(none.fp8_copy_bytes - act.fp8_copy_bytes, 1.03125 * rows * width);
}

TEST(RecomputeModules, layernorm_drops_both_norm_outputs_and_mlp_a_dense_mlps_internals) {
  const ModelSpec m = model_preset("llama3-8b");  // h 4096, f 14336, SwiGLU
  const double s = double(m.seq_len), h = 4096, f = 14336;
  // Two norm outputs of s x h at 2 bytes, whole without sequence parallel, / tp 2 under it.
  EXPECT_DOUBLE_EQ(layer_activations(m, plain(), 2).bytes - layer_activations(m, selective({.layernorm = true}), 2).bytes,
                   4 * s * h);
  ExecutionSpec sp = selective({.layernorm = true}), sp0 = plain();
  sp.sequence_parallel = sp0.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_activations(m, sp0, 2).bytes - layer_activations(m, sp, 2).bytes, 4 * s * h / 2);
  // Fused SwiGLU holds gate and up (2f) and the product (f) at 2 bytes: 6 s f / tp, all of it
  // dropped; under FP8 GEMMs the product is FC2's 1-byte copy: (4 + 1) s f / tp.
  EXPECT_DOUBLE_EQ(layer_activations(m, plain(), 2).bytes - layer_activations(m, selective({.mlp = true}), 2).bytes,
                   6 * s * f / 2);
  EXPECT_DOUBLE_EQ(layer_activations(m, plain(Precision::FP8), 2).bytes -
                       layer_activations(m, selective({.mlp = true}, Precision::FP8), 2).bytes,
                   5 * s * f / 2);
}

TEST(RecomputeModules, naming_modules_leaves_the_core_attention_out_unless_named) {
  // Unfused attention: the scores (2 a s^2 b / t without dropout) are kept unless core_attn is named.
  ModelSpec m = model_preset("llama3-8b");
  m.seq_len = 1024;
  ExecutionSpec named = selective({.layernorm = true}), with = selective({.core_attn = true, .layernorm = true});
  named.attention = with.attention = AttentionKind::Unfused;
  const double scores = 2.0 * 32 * 1024 * 1024 / 2;
  EXPECT_DOUBLE_EQ(layer_activations(m, named, 2).bytes - layer_activations(m, with, 2).bytes, scores);
}

TEST(RecomputeModules, their_forwards_run_again_in_the_backward) {
  RunSpec run;
  run.model = mla();
  run.cluster = cluster_preset("dgx-b200");
  run.cluster.nodes = 1;
  run.layout = Layout{2, 1, 1, 1, "tp-dp-pp"};
  run.exec = plain();
  run.exec.global_batch_size = 1;
  const Estimate none = estimate(run, 0);
  run.exec = selective({.mla_up_proj = true});
  run.exec.global_batch_size = 1;
  const Estimate up = estimate(run, 0);
  run.exec = selective({.layernorm = true});
  run.exec.global_batch_size = 1;
  const Estimate norms = estimate(run, 0);
  const CostConstants& c = none.cost;
  const GpuSpec& gpu = run.cluster.gpu;
  // The two up projections over tp 2: 4096 x 1536 x (128 x 192 / 2) and 4096 x 512 x (128 x 256 / 2).
  const double T = 4096, peak = gpu.bf16_flops;
  const double gemms = gemm_time_s(T, 1536, 128 * 192 / 2, 1, peak, c.gemm_peak_efficiency, c) +
                       gemm_time_s(T, 512, 128 * 256 / 2, 1, peak, c.gemm_peak_efficiency, c);
  EXPECT_NEAR(up.stages[0].recompute_s, 4 * gemms, 1e-12);
  EXPECT_NEAR(up.stages[0].executed_flops - none.stages[0].executed_flops,
              4 * 2 * T * (1536.0 * 128 * 192 / 2 + 512.0 * 128 * 256 / 2), 1);
  EXPECT_EQ(up.stages[0].model_flops, none.stages[0].model_flops);
  // The norms: memory-bound, their 4 s h output bytes x the element-wise traffic factor at HBM rate.
  const double hbm = gpu.hbm_Bps * c.hbm_efficiency;
  EXPECT_NEAR(norms.stages[0].recompute_s, 4 * c.elementwise_traffic_per_stored_byte * 4 * T * 7168 / hbm, 1e-12);
  EXPECT_NEAR(up.time.compute - none.time.compute, up.stages[0].recompute_s, 1e-9);  // one micro-batch
}
