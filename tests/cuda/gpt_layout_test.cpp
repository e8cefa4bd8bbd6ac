// GptCuda's flat parameter layout holds exactly the parameters the model spec counts (plus the
// zero padding of the vocabulary), contiguously; bad shapes are refused before touching a GPU.
#include <gtest/gtest.h>

#include "core/model_spec.h"
#include "core/problems.h"
#include "runtime/cuda/gpt_cuda.h"

using namespace trident;
using namespace trident::cuda;

TEST(GptParamTensors, count_matches_model_spec_for_gpt2_presets) {
  for (const char* name : {"gpt2-small", "gpt2-medium"}) {
    ModelSpec spec = model_preset(name);
    GptShape shape{int(spec.layers), int(spec.hidden), int(spec.heads), int(spec.seq_len), int(spec.vocab)};
    auto tensors = gpt_param_tensors(shape);
    size_t offset = 0;
    for (const auto& t : tensors) {
      EXPECT_EQ(t.offset, offset) << name << " " << t.name;
      offset += t.count;
    }
    const size_t padding = size_t(shape.padded_vocab() - shape.vocab) * shape.hidden;
    EXPECT_EQ(int64_t(offset - padding), count_parameters(spec).total) << name;
  }
}

TEST(GptParamTensors, vocabulary_is_padded_to_a_multiple_of_128) {
  EXPECT_EQ((GptShape{1, 64, 1, 8, 50257}).padded_vocab(), 50304);
  EXPECT_EQ((GptShape{1, 64, 1, 8, 128}).padded_vocab(), 128);
}

TEST(GptParamTensors, decay_applies_to_matrices_and_embeddings_only) {
  for (const auto& t : gpt_param_tensors(GptShape{2, 64, 2, 16, 100})) {
    const bool matrix =
        t.name == "wte" || t.name == "wpe" || (t.name.back() == 'w' && t.name.rfind("ln", 0) != 0);
    EXPECT_EQ(t.decay, matrix) << t.name;
  }
}

TEST(GptCuda, head_size_the_attention_kernel_cannot_run_is_refused_with_the_fix) {
  try {
    GptCuda model(GptShape{2, 100, 4, 64, 1000}, 1, 64, Precision::BF16);
    FAIL() << "constructed a model with head size 25";
  } catch (const InputError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].what.find("100/4"), std::string::npos) << e.problems()[0].what;
    EXPECT_NE(e.problems()[0].fix.find("32, 64, 96 or 128"), std::string::npos);
  }
}

TEST(GptCuda, sequence_longer_than_the_model_is_refused) {
  EXPECT_THROW(GptCuda(GptShape{2, 128, 2, 64, 1000}, 2, 65, Precision::FP32), InputError);
}
