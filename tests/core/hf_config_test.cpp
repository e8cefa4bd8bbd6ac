// Models read from Hugging Face config.json files (data/models/hf/, the public files' values)
// plan with the parameter counts their publishers state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/hf_config.h"
#include "core/options.h"
#include "core/run_spec.h"

using namespace trident;

namespace {

std::string hf_path(const std::string& name) { return std::string(TRIDENT_SOURCE_DIR) + "/data/models/hf/" + name; }

ModelSpec read(const std::string& name, std::optional<int64_t> seq = std::nullopt) {
  Problems p;
  auto m = model_from_hf_config_file(hf_path(name), "--hf-config", p, seq);
  std::string all;
  for (const auto& x : p.list()) all += x.what + "\n";
  EXPECT_TRUE(m.has_value()) << name << ":\n" << all;
  return m.value_or(ModelSpec{});
}

std::vector<Problem> problems_of(const std::string& json, std::optional<int64_t> seq = std::nullopt) {
  Problems p;
  auto m = model_from_hf_config(json, "config.json", p, seq);
  EXPECT_EQ(m.has_value(), p.empty());
  return p.list();
}

bool names(const std::vector<Problem>& ps, const std::string& text) {
  for (const auto& p : ps)
    if (p.what.find(text) != std::string::npos) return true;
  return false;
}

// A publisher's figure as stated ("30.5B", "37B"): ours must agree within 0.1%, or be the figure
// written to the digits it was given in: rounded (Mistral's 141B for 140.6B) or cut (Qwen's 3.3B
// for 3.35B, DeepSeek's 37B for 37.55B), as publishers do both.
void expect_published(double ours, double published, double last_digit, const std::string& what) {
  const bool close = std::abs(ours - published) <= 0.001 * published;
  const bool rounded = std::abs(std::round(ours / last_digit) * last_digit - published) < last_digit / 100;
  const bool cut = std::abs(std::floor(ours / last_digit) * last_digit - published) < last_digit / 100;
  EXPECT_TRUE(close || rounded || cut) << what << ": ours " << ours / 1e9 << " B, published " << published / 1e9
                                       << " B (to " << last_digit / 1e9 << " B)";
  std::printf("  %-40s ours %10.4f B   published %8.2f B\n", what.c_str(), ours / 1e9, published / 1e9);
}

}  // namespace

// Qwen3 model cards: "30.5B in total and 3.3B activated", "235B in total and 22B activated".
TEST(HfConfig, qwen3_moe_counts_equal_the_model_cards) {
  const ModelSpec a = read("qwen3-30b-a3b.json");
  EXPECT_EQ(a.head_dim(), 128);  // not hidden / heads = 64
  EXPECT_EQ(a.q_dim(), 4096);
  EXPECT_TRUE(a.qk_norm);
  EXPECT_EQ(a.rope_theta, 1e6);
  EXPECT_EQ(a.norm_epsilon(), 1e-6);
  EXPECT_FALSE(a.tied_embeddings());
  const ParamCount pa = count_parameters(a);
  expect_published(double(pa.total), 30.5e9, 0.1e9, "Qwen3-30B-A3B total");
  expect_published(double(pa.active), 3.3e9, 0.1e9, "Qwen3-30B-A3B active");
  expect_published(double(pa.total - pa.token_embedding - pa.output_layer), 29.9e9, 0.1e9, "Qwen3-30B-A3B non-embedding");
  const ParamCount pb = count_parameters(read("qwen3-235b-a22b.json"));
  expect_published(double(pb.total), 235e9, 1e9, "Qwen3-235B-A22B total");
  expect_published(double(pb.active), 22e9, 1e9, "Qwen3-235B-A22B active");
  expect_published(double(pb.total - pb.token_embedding - pb.output_layer), 234e9, 1e9, "Qwen3-235B-A22B non-embedding");
}

// DeepSeek-V3 technical report: 671B total, 37B activated per token; the 14B of the MTP module
// (685B on Hugging Face) are not in the 671B.
TEST(HfConfig, deepseek_v3_counts_equal_the_report) {
  const ModelSpec m = read("deepseek-v3.json");
  EXPECT_TRUE(m.is_mla());
  EXPECT_EQ(m.moe_layers(), 58);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.router_score, "sigmoid");
  const ParamCount c = count_parameters(m);
  expect_published(double(c.total), 671e9, 1e9, "DeepSeek-V3 total");
  expect_published(double(c.active), 37e9, 1e9, "DeepSeek-V3 active");
  // With the MTP module, which repeats the embedding and the head (2 x 0.93B) in the Hugging Face
  // checkpoint (shared with the main model here): 685B on its card.
  expect_published(double(c.total + c.mtp + c.token_embedding + c.output_layer), 685e9, 1e9,
                   "DeepSeek-V3 checkpoint with MTP");
}

// gpt-oss model card, table 1: 116.83B total, 5.13B active; its breakdown (MLP 114.71B,
// attention 0.96B, embedding + unembedding 1.16B) counts the unembedding but not the embedding
// lookup among the active ones.
TEST(HfConfig, gpt_oss_counts_equal_the_model_card) {
  const ModelSpec m = read("gpt-oss-120b.json");
  EXPECT_EQ(m.head_dim(), 64);
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.full_attention_every, 2);
  EXPECT_TRUE(m.is_window_layer(0));
  EXPECT_FALSE(m.is_window_layer(1));
  const ParamCount c = count_parameters(m);
  expect_published(double(c.total), 116.83e9, 0.01e9, "gpt-oss-120b total");
  expect_published(double(c.active - c.token_embedding), 5.13e9, 0.01e9, "gpt-oss-120b active");
  expect_published(double(36 * c.attention_per_layer), 0.96e9, 0.01e9, "gpt-oss-120b attention");
  expect_published(double(c.token_embedding + c.output_layer), 1.16e9, 0.01e9, "gpt-oss-120b embedding + unembedding");
}

// Meta: Llama 4 Maverick, 17B active and 400B total parameters (the text model: the vision
// encoder is not planned). MoE on every other layer, from the second.
TEST(HfConfig, llama4_maverick_counts_equal_meta) {
  const ModelSpec m = read("llama4-maverick-17b-128e.json", 8192);
  EXPECT_EQ(m.moe_layers(), 24);
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_EQ(m.ffn_hidden, 16384);
  EXPECT_EQ(m.expert_ffn_hidden, 8192);
  const ParamCount c = count_parameters(m);
  expect_published(double(c.total), 400e9, 1e9, "Llama 4 Maverick total");
  expect_published(double(c.active), 17e9, 1e9, "Llama 4 Maverick active");
}

// Its chunked attention (8192 tokens) is not modelled: refused for longer sequences, by name.
TEST(HfConfig, llama4_chunked_attention_beyond_the_chunk_is_refused_by_name) {
  Problems p;
  EXPECT_FALSE(model_from_hf_config_file(hf_path("llama4-maverick-17b-128e.json"), "--hf-config", p).has_value());
  ASSERT_FALSE(p.empty());
  EXPECT_TRUE(names(p.list(), "attention_chunk_size")) << p.list()[0].what;
}

// Mistral AI: Mixtral 8x22B, 141B parameters, 39B active.
TEST(HfConfig, mixtral_8x22b_counts_equal_mistral) {
  const ParamCount c = count_parameters(read("mixtral-8x22b.json"));
  expect_published(double(c.total), 141e9, 1e9, "Mixtral 8x22B total");
  expect_published(double(c.active), 39e9, 1e9, "Mixtral 8x22B active");
}

// Llama 3.1 405B: the Hugging Face checkpoint's 405,853,388,800 parameters; its llama3 rope scaling read.
TEST(HfConfig, llama31_405b_count_equals_the_checkpoint) {
  const ModelSpec m = read("llama3.1-405b.json", 8192);
  EXPECT_EQ(count_parameters(m).total, 405853388800);
  EXPECT_EQ(m.rope_scaling.type, "llama3");
  EXPECT_EQ(m.rope_scaling.factor, 8.0);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.seq_len, 8192);
}

TEST(HfConfig, unknown_keys_and_values_are_refused_by_name_together) {
  auto ps = problems_of(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "max_position_embeddings": 128, "vocab_size": 100, "hidden_act": "gelu",
      "rope_scaling": {"rope_type": "longrope", "factor": 4}, "frobnicate": 3})");
  EXPECT_TRUE(names(ps, "'frobnicate'"));
  EXPECT_TRUE(names(ps, "'hidden_act'"));
  EXPECT_TRUE(names(ps, "longrope"));
  EXPECT_EQ(ps.size(), 3u);
  EXPECT_TRUE(names(problems_of(R"({"model_type": "t5"})"), "model_type 't5'"));
  EXPECT_TRUE(names(problems_of("{not json"), "not a JSON object"));
  auto missing = problems_of(R"({"model_type": "qwen3"})");
  EXPECT_TRUE(names(missing, "'hidden_size'"));
  EXPECT_TRUE(names(missing, "'num_hidden_layers'"));
}

TEST(HfConfig, gpt2_reads_its_own_keys) {
  auto m = [] {
    Problems p;
    auto r = model_from_hf_config(R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": null,
        "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
        "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "architectures": ["GPT2LMHeadModel"]})",
                                  "gpt2.json", p);
    EXPECT_TRUE(p.empty());
    return r.value_or(ModelSpec{});
  }();
  EXPECT_EQ(count_parameters(m).total, 124439808);  // GPT-2 small's checkpoint
  EXPECT_TRUE(m.has_dropout());
}

// The one place a model is resolved takes --hf-config (any command); with --model it is refused;
// --config with a JSON file points to --hf-config.
TEST(HfConfig, resolve_model_takes_hf_config_and_flags_override_it) {
  OptionValues v(model_options());
  v.set("hf-config", hf_path("qwen3-30b-a3b.json"), "--hf-config");
  v.set("seq-len", "4096", "--seq-len");
  Problems p;
  ModelSpec m = resolve_model(v, p);
  EXPECT_TRUE(p.empty()) << (p.empty() ? "" : p.list()[0].what);
  EXPECT_EQ(m.seq_len, 4096);
  EXPECT_EQ(m.head_dim(), 128);
  v.set("model", "llama3-8b", "--model");
  Problems q;
  resolve_model(v, q);
  EXPECT_TRUE(names(q.list(), "both name the model"));

  OptionValues t(model_options());
  Problems r;
  t.load_toml_text("{\"model_type\": \"qwen3\"}", "config.json", r);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r.list()[0].fix.find("--hf-config"), std::string::npos) << r.list()[0].fix;
}

// YaRN as the released configs give it: DeepSeek-V3's (mscale and mscale_all_dim 1) and GPT-OSS's
// (truncate false, no mscale keys: Hugging Face's defaults), every key read.
TEST(HfConfig, yarn_of_deepseek_v3_and_gpt_oss_is_read_key_by_key) {
  const ModelSpec d = read("deepseek-v3.json", 4096);
  EXPECT_EQ(d.rope_scaling.type, "yarn");
  EXPECT_EQ(d.rope_scaling.factor, 40.0);
  EXPECT_EQ(d.rope_scaling.original_max_position, 4096);
  EXPECT_EQ(d.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(d.rope_scaling.beta_slow, 1.0);
  EXPECT_EQ(d.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_TRUE(d.rope_scaling.truncate);
  const ModelSpec g = read("gpt-oss-120b.json", 4096);
  EXPECT_EQ(g.rope_scaling.type, "yarn");
  EXPECT_EQ(g.rope_scaling.factor, 32.0);
  EXPECT_FALSE(g.rope_scaling.truncate);
  EXPECT_EQ(g.rope_scaling.mscale, 1.0);
  EXPECT_EQ(g.rope_scaling.mscale_all_dim, 0.0);
}

// An attention_factor other than the derived one, a yarn without its factor, a truncate that is
// not a boolean and an unknown key: each refused by name, all together.
TEST(HfConfig, yarn_keys_it_cannot_honour_are_refused_by_name) {
  const std::string head = R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "max_position_embeddings": 128, "vocab_size": 100, "rope_scaling": )";
  auto af = problems_of(head + R"({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5}})");
  ASSERT_EQ(af.size(), 1u);
  EXPECT_TRUE(names(af, "attention_factor 1.5 differs from 1.1386")) << af[0].what;
  EXPECT_TRUE(problems_of(head + R"({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.1386294361119891}})").empty());
  EXPECT_TRUE(names(problems_of(head + R"({"rope_type": "yarn"}})"), "without its 'factor'"));
  auto bad = problems_of(head + R"({"rope_type": "yarn", "factor": 4.0, "truncate": "no", "rope_magic": 1}})");
  EXPECT_TRUE(names(bad, "'truncate'"));
  EXPECT_TRUE(names(bad, "'rope_magic'"));
  EXPECT_EQ(bad.size(), 2u);
}
