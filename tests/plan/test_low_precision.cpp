// The quantised precisions (fp8 per tensor, mxfp8, nvfp4): bytes per parameter and per saved
// input by hand, the tensor-core peak each runs at, and the cast traffic of one formula.
#include <gtest/gtest.h>

#include "core/units.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"
#include "plan/mfu.h"

using namespace trident;
using namespace trident::plan;

TEST(LowPrecision, weights_keep_bf16_and_the_quantised_copies_by_hand) {
  // bf16 weights (2 B) + Transformer Engine's cached copies; fp32 gradients, master + 2 moments.
  auto b = state_bytes(Precision::FP8, 32);
  EXPECT_DOUBLE_EQ(b.weights, 2 + 1);
  b = state_bytes(Precision::MXFP8, 32);
  EXPECT_DOUBLE_EQ(b.weights, 2 + 2 * (1 + 1.0 / 32));  // rowwise + columnwise, one E8M0 per 32
  EXPECT_DOUBLE_EQ(b.weights + b.gradients + b.optimizer, 4.0625 + 4 + 12);
  EXPECT_DOUBLE_EQ(b.gathered, 2);  // ZeRO-3 gathers the bf16 weights
  b = state_bytes(Precision::NVFP4, 32);
  EXPECT_DOUBLE_EQ(b.weights, 2 + 2 * (0.5 + 1.0 / 16));  // E2M1 + one E4M3 per 16
  EXPECT_DOUBLE_EQ(b.weights + b.gradients + b.optimizer, 3.125 + 4 + 12);
  EXPECT_DOUBLE_EQ(b.gathered, 2);
}

TEST(LowPrecision, saved_gemm_inputs_take_the_formats_bytes) {
  // The copies kept for the weight-gradient GEMMs: the same elements, 1, 1.03125 and 0.5625 B each.
  const ModelSpec m = model_preset("llama3-8b");
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.attention = AttentionKind::Flash;
  e.precision = Precision::FP8;
  const LayerActivations fp8 = layer_activations(m, e, 2);
  ASSERT_GT(fp8.fp8_copy_bytes, 0);
  e.precision = Precision::MXFP8;
  const LayerActivations mx = layer_activations(m, e, 2);
  e.precision = Precision::NVFP4;
  const LayerActivations nv = layer_activations(m, e, 2);
  EXPECT_DOUBLE_EQ(mx.fp8_copy_bytes, fp8.fp8_copy_bytes * (1 + 1.0 / 32));
  EXPECT_DOUBLE_EQ(nv.fp8_copy_bytes, fp8.fp8_copy_bytes * (0.5 + 1.0 / 16));
  EXPECT_DOUBLE_EQ(mx.fp8_given_up_bytes, fp8.fp8_given_up_bytes);  // the bf16 tensors they replace
  EXPECT_DOUBLE_EQ(nv.bytes - fp8.bytes, nv.fp8_copy_bytes - fp8.fp8_copy_bytes);
}

TEST(LowPrecision, each_precision_runs_at_its_tensor_core_peak) {
  const GpuSpec gb200 = gpu_preset("gb200-186g"), h100 = gpu_preset("h100-80g");
  EXPECT_DOUBLE_EQ(peak_flops(gb200, Precision::NVFP4), 10000 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(gb200, Precision::MXFP8), 5000 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(gpu_preset("b200-180g"), Precision::NVFP4), 9000 * kTera);
  EXPECT_DOUBLE_EQ(peak_flops(h100, Precision::NVFP4), 0);  // Hopper has no FP4
  EXPECT_FALSE(h100.block_scaling());
  EXPECT_TRUE(gb200.block_scaling());
  // A dense layer's weight GEMMs: nvfp4 at twice fp8's peak takes half fp8's time (same efficiency).
  const ModelSpec m = model_preset("llama3-70b");
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.attention = AttentionKind::Flash;
  const CostConstants& c = default_constants();
  e.precision = Precision::FP8;
  const LayerCompute f8 = layer_compute(m, e, 2, gb200, c);
  e.precision = Precision::MXFP8;
  const LayerCompute mx = layer_compute(m, e, 2, gb200, c);
  e.precision = Precision::NVFP4;
  const LayerCompute nv = layer_compute(m, e, 2, gb200, c);
  EXPECT_TRUE(nv.fp8);
  EXPECT_DOUBLE_EQ(mx.gemm_s, f8.gemm_s);
  EXPECT_NEAR(nv.gemm_s / f8.gemm_s, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(nv.attention_s, f8.attention_s);  // attention stays at the bf16 peak
}

TEST(LowPrecision, casts_write_the_formats_copies_on_the_fp8_casts_formula) {
  const CostConstants& c = default_constants();
  const double fp8 = cast_bytes_per_element(Precision::FP8, c);
  EXPECT_DOUBLE_EQ(fp8, c.fp8_cast_bytes_per_element);
  // read 2 B of bf16, write rowwise and columnwise copies with their scales
  EXPECT_DOUBLE_EQ(cast_bytes_per_element(Precision::MXFP8, c) - fp8, 2 * (1 + 1.0 / 32) - 1);
  EXPECT_DOUBLE_EQ(cast_bytes_per_element(Precision::NVFP4, c) - fp8, 2 * (0.5 + 1.0 / 16) - 1);
}
