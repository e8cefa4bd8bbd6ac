#include <gtest/gtest.h>

#include <cmath>

#include "core/model_spec.h"

using namespace trident;

// Published parameter counts (Hugging Face checkpoints of the same architectures), independent
// of our formula: GPT-2 counts include learned positions and the final LayerNorm.
TEST(ModelSpec, preset_parameter_counts_match_published_checkpoints) {
  const std::pair<const char*, int64_t> expected[] = {
      {"gpt2-small", 124439808},       {"gpt2-medium", 354823168},      {"gpt2-large", 774030080},
      {"gpt2-xl", 1557611200},         {"llama2-7b", 6738415616},       {"llama2-13b", 13015864320},
      {"llama2-70b", 68976648192},     {"llama3-8b", 8030261248},       {"llama3-70b", 70553706496},
      {"llama3-405b", 405853388800},
  };
  for (const auto& [name, count] : expected) EXPECT_EQ(count_parameters(model_preset(name)).total, count) << name;
}

TEST(ModelSpec, gpt3_family_matches_paper_sizes) {
  // GPT-3 paper, Table 2.1 (rounded sizes). 13B uses d_model 5120 instead of the paper's 5140.
  const std::pair<const char*, double> nominal[] = {{"gpt3-125m", 125e6}, {"gpt3-350m", 350e6}, {"gpt3-760m", 760e6},
                                                     {"gpt3-1.3b", 1.3e9}, {"gpt3-2.7b", 2.7e9}, {"gpt3-6.7b", 6.7e9},
                                                     {"gpt3-13b", 13e9},   {"gpt3-175b", 175e9}};
  for (const auto& [name, n] : nominal) {
    double got = double(count_parameters(model_preset(name)).total);
    EXPECT_NEAR(got / n, 1.0, 0.04) << name << " has " << got;
  }
  double gpt3 = double(count_parameters(model_preset("gpt3-175b")).total);
  EXPECT_NEAR(gpt3 / 174.6e9, 1.0, 0.001) << gpt3;
}

TEST(ModelSpec, gpt_count_equals_narayanan_formula_plus_final_layernorm) {
  for (const auto& name : model_preset_names()) {
    ModelSpec m = model_preset(name);
    if (m.family != ModelFamily::GPT) continue;
    const int64_t L = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    EXPECT_EQ(count_parameters(m).total, 12 * L * h * h + 13 * L * h + V * h + s * h + 2 * h) << name;
  }
}

TEST(ModelSpec, llama_terms_follow_gqa_and_swiglu) {
  ModelSpec m = model_preset("llama2-70b");
  ParamCount c = count_parameters(m);
  const int64_t h = 8192, kv = 8 * 128;
  EXPECT_EQ(c.attention_per_layer, 2 * h * h + 2 * h * kv);
  EXPECT_EQ(c.mlp_per_layer, 3 * h * 28672);
  EXPECT_EQ(c.norms_per_layer, 2 * h);
  EXPECT_EQ(c.output_layer, 32000 * h);
  EXPECT_EQ(c.position_embedding, 0);
}

TEST(ModelSpec, unknown_preset_names_the_choices) {
  try {
    model_preset("gpt5");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].what.find("gpt5"), std::string::npos);
    EXPECT_NE(e.problems()[0].fix.find("gpt3-175b"), std::string::npos);
  }
}

TEST(ModelSpec, validation_collects_every_bad_size) {
  ModelSpec m = model_preset("gpt2-small");
  m.layers = 0;
  m.hidden = 770;  // not divisible by 12 heads
  m.vocab = -5;
  Problems p;
  validate_model(m, p);
  EXPECT_EQ(p.size(), 3u);
}
