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

// Mixtral: the Hugging Face checkpoint of 8x7B holds 46,702,792,704 parameters; the paper gives
// 46.7B total / 12.9B active (8x7B) and 141B / 39B (8x22B, Mistral's release notes).
TEST(ModelSpec, mixtral_totals_and_active_parameters_match_the_published_figures) {
  const ParamCount small = count_parameters(model_preset("mixtral-8x7b"));
  EXPECT_EQ(small.total, 46702792704);
  EXPECT_NEAR(double(small.active) / 1e9, 12.9, 0.05);
  const ParamCount large = count_parameters(model_preset("mixtral-8x22b"));
  EXPECT_NEAR(double(large.total) / 1e9, 141, 0.5);
  EXPECT_NEAR(double(large.active) / 1e9, 39, 0.5);
}

// Hand-computed terms of one Mixtral 8x7B layer: attention 4096 x (4096 + 2 x 1024) + 4096^2,
// one SwiGLU expert 3 x 4096 x 14336, the router 4096 x 8, two RMSNorms.
TEST(ModelSpec, moe_layer_terms_are_router_experts_and_attention) {
  const ParamCount c = count_parameters(model_preset("mixtral-8x7b"));
  EXPECT_EQ(c.attention_per_layer, 41943040);
  EXPECT_EQ(c.expert_params, 176160768);
  EXPECT_EQ(c.routed_experts_per_layer, 8 * 176160768LL);
  EXPECT_EQ(c.router_per_layer, 32768);
  EXPECT_EQ(c.per_layer, 41943040 + 8 * 176160768LL + 32768 + 8192);
  // Active: the total less the 6 experts a token skips in each of the 32 layers.
  EXPECT_EQ(c.active, c.total - 32 * 6 * 176160768LL);
}

// DeepSeek-V3: 671B total, 37B active (technical report). The preset counts MLA as standard
// attention and leaves out the multi-token-prediction module, so it is within 1% and 5%.
TEST(ModelSpec, deepseek_style_preset_is_close_to_the_published_figures) {
  const ModelSpec m = model_preset("deepseek-v3-style");
  const ParamCount c = count_parameters(m);
  EXPECT_EQ(m.moe_layers(), 58);
  EXPECT_EQ(c.shared_experts_per_layer, c.expert_params);
  EXPECT_NEAR(double(c.total) / 671e9, 1.0, 0.01);
  EXPECT_NEAR(double(c.active) / 37e9, 1.0, 0.05);
}

TEST(ModelSpec, moe_validation_names_each_bad_size) {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.experts_per_token = 9;
  m.capacity_factor = 0.5;
  m.moe_dense_layers = 32;
  Problems p;
  validate_model(m, p);
  EXPECT_EQ(p.size(), 3u);
}

// --moe-layer-freq N (Megatron's): after the dense leading layers, every N-th layer is a MoE
// layer; the others keep the dense MLP and are counted as dense layers.
TEST(ModelSpec, moe_layer_freq_makes_every_nth_layer_a_moe_layer) {
  ModelSpec m = model_preset("mixtral-8x7b");  // 32 layers, every one a MoE layer
  const ParamCount all = count_parameters(m);
  m.moe_layer_freq = 2;
  EXPECT_EQ(m.moe_layers(), 16);
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(30));
  EXPECT_FALSE(m.is_moe_layer(31));
  const ParamCount half = count_parameters(m);
  // 16 MoE layers became dense: each lost its router and 8 experts and gained one dense MLP.
  EXPECT_EQ(all.total - half.total, 16 * (all.router_per_layer + all.routed_experts_per_layer - all.mlp_per_layer));
  m.moe_dense_layers = 1, m.moe_layer_freq = 3;  // layers 1, 4, ..., 31: 11 of them
  EXPECT_EQ(m.moe_layers(), 11);
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(31));
  for (int64_t bad : {0, 33}) {
    m.moe_layer_freq = bad;
    Problems p;
    validate_model(m, p);
    ASSERT_EQ(p.size(), 1u) << bad;
    EXPECT_NE(p.list().front().what.find("--moe-layer-freq"), std::string::npos);
  }
}
