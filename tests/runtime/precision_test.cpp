// The CPU backend computes in fp32 only: it says so through supports(), a bf16 tensor given to
// one of its kernels is refused with the op and the type named, and a bf16 model on it is an
// InputError whose fix points to the CUDA backend.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/problems.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"

using namespace trident;

TEST(Precision, cpu_backend_supports_fp32_only) {
  auto k = kernels::make_cpu_kernels(1);
  EXPECT_TRUE(k->supports(kernels::DType::F32));
  EXPECT_FALSE(k->supports(kernels::DType::BF16));
}

TEST(Precision, device_predicate_answers_before_any_backend_is_built) {
  using kernels::DType;
  EXPECT_TRUE(kernels::device_supports("cpu", DType::F32));
  EXPECT_FALSE(kernels::device_supports("cpu", DType::BF16));
  EXPECT_TRUE(kernels::device_supports("cuda", DType::BF16));
  EXPECT_FALSE(kernels::device_supports("cuda", DType::F16));
  EXPECT_FALSE(kernels::device_supports("tpu", DType::F32));
}

TEST(Precision, cpu_kernel_refuses_a_bf16_tensor_naming_op_and_type) {
  auto k = kernels::make_cpu_kernels(1);
  std::vector<uint16_t> half(8);
  std::vector<float> out(8);
  const kernels::Tensor bf16(half.data(), kernels::DType::BF16, half.size());
  try {
    k->gelu_forward(kernels::Tensor(out.data(), out.size()), bf16);
    FAIL() << "a bf16 tensor was accepted by the CPU backend";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

TEST(Precision, bf16_model_on_the_cpu_is_refused_with_the_fix) {
  auto k = kernels::make_cpu_kernels(1);
  ModelSpec m;
  m.layers = 1, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 8, m.vocab = 16;
  try {
    nn::GptStage stage(*k, nn::Shard::whole(m), {.B = 1, .T = 8, .compute = kernels::DType::BF16});
    FAIL() << "a bf16 stage was built on the CPU";
  } catch (const InputError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].what.find("bf16"), std::string::npos) << e.problems()[0].what;
    EXPECT_NE(e.problems()[0].fix.find("--device cuda"), std::string::npos) << e.problems()[0].fix;
  }
}

// The stage's shape has no default: a config that names no B or T is refused, naming both.
TEST(StageConfig, a_config_without_the_micro_batch_shape_is_refused) {
  auto k = kernels::make_cpu_kernels(1);
  ModelSpec m;
  m.layers = 1, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 8, m.vocab = 16;
  try {
    nn::GptStage stage(*k, nn::Shard::whole(m), {.compute = kernels::DType::F32});
    FAIL() << "a stage without B and T was built";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("B (0)"), std::string::npos) << what;
    EXPECT_NE(what.find("T (0)"), std::string::npos) << what;
  }
}

TEST(Precision, fp32_stage_reports_its_allocations_in_one_table) {
  auto k = kernels::make_cpu_kernels(1);
  ModelSpec m;
  m.layers = 2, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 8, m.vocab = 16;
  nn::GptStage stage(*k, nn::Shard::whole(m), {.B = 2, .T = 8});
  nn::Activations acts(stage);
  const std::string table = stage.memory_table() + acts.memory_table();
  for (const char* region : {"master weights (f32)", "gradients (f32)", "residual stream", "qkv", "logits", "total"})
    EXPECT_NE(table.find(region), std::string::npos) << region << " missing from\n" << table;
  EXPECT_EQ(table.find("bf16"), std::string::npos) << "an fp32 stage keeps no bf16 copy\n" << table;
}
