// JSON forms of a model and a tokenizer (see run_meta.h).
#include "runtime/engine/run_meta.h"

#include <stdexcept>

#include "core/problems.h"

namespace trident::engine {

nlohmann::json model_to_json(const ModelSpec& m) {
  nlohmann::json j = {{"name", m.name},       {"family", to_string(m.family)}, {"layers", m.layers},
          {"hidden", m.hidden},   {"heads", m.heads},              {"kv_heads", m.kv_heads > 0 ? m.kv_heads : m.heads},
          {"ffn_hidden", m.ffn_hidden}, {"seq_len", m.seq_len},    {"vocab", m.vocab},
          {"rope_theta", m.rope_theta}, {"tied_embeddings", m.tied_embeddings()}};
  // Qwen3's attention settings, where the model has them (a Llama or GPT meta stays as before).
  if (m.head_size > 0) j["head_dim"] = m.head_size;
  if (m.qk_norm) j["qk_norm"] = true;
  if (m.norm_eps != 1e-5) j["norm_epsilon"] = m.norm_eps;
  // GPT-OSS's attention settings, where the model has them.
  if (m.sliding_window > 0) j["window_size"] = m.sliding_window;
  if (m.full_attention_every > 0) j["window_attn_skip_freq"] = m.full_attention_every;
  if (m.attention_sinks) j["attention_sinks"] = true;
  // Biases other than the family's, GPT-OSS's clamped unit (a meta without them stays as before).
  if (m.qkv_bias >= 0) j["qkv_bias"] = m.qkv_bias == 1;
  if (m.proj_bias >= 0) j["proj_bias"] = m.proj_bias == 1;
  if (m.mlp_bias >= 0) j["mlp_bias"] = m.mlp_bias == 1;
  if (m.router_bias) j["router_bias"] = true;
  if (m.activation_clamp > 0) j["activation_clamp"] = m.activation_clamp;
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;  // DeepSeek-V3's multi-token prediction
  // DeepSeek-V2/V3's multi-head latent attention, where the model has it.
  if (m.is_mla())
    j.update({{"q_lora_rank", m.q_lora_rank}, {"kv_lora_rank", m.kv_lora_rank},
              {"qk_nope_head_dim", m.qk_nope_head_dim}, {"qk_rope_head_dim", m.qk_rope_head_dim},
              {"v_head_dim", m.v_head_dim}});
  const RopeScaling& rs = m.rope_scaling;
  if (rs.type == "llama3")  // Llama 3.1's rope scaling
    j["rope_scaling"] = {{"type", "llama3"},
                         {"factor", rs.factor},
                         {"low_freq_factor", rs.low_freq_factor},
                         {"high_freq_factor", rs.high_freq_factor},
                         {"original_max_position", rs.original_max_position}};
  if (rs.type == "yarn")  // DeepSeek-V3's and GPT-OSS's
    j["rope_scaling"] = {{"type", "yarn"},          {"factor", rs.factor},
                         {"beta_fast", rs.beta_fast}, {"beta_slow", rs.beta_slow},
                         {"mscale", rs.mscale},       {"mscale_all_dim", rs.mscale_all_dim},
                         {"truncate", rs.truncate},   {"original_max_position", rs.original_max_position}};
  // A mixture-of-experts model's sizes (a dense model's meta stays as before).
  if (m.is_moe())
    j.update({{"experts", m.experts}, {"experts_per_token", m.experts_per_token},
              {"expert_ffn_hidden", m.expert_ffn_hidden}, {"shared_experts", m.shared_experts},
              {"moe_dense_layers", m.moe_dense_layers}, {"moe_layer_freq", m.moe_layer_freq},
              {"capacity_factor", m.capacity_factor}});
  // DeepSeek-V3's router, where the model has it (a softmax router's meta stays as before).
  if (m.is_moe() && m.router_score != "softmax") j["router_score"] = m.router_score;
  if (m.is_moe() && m.router_expert_bias) j["router_expert_bias"] = true;
  if (m.is_moe() && m.router_groups > 0) j["router_groups"] = m.router_groups, j["router_group_topk"] = m.router_group_topk;
  if (m.is_moe() && m.router_topk_scaling != 1.0) j["router_topk_scaling"] = m.router_topk_scaling;
  return j;
}

ModelSpec model_from_json(const nlohmann::json& j) {
  ModelSpec m;
  try {
    m.name = j.at("name").get<std::string>();
    m.layers = j.at("layers").get<int64_t>();
    m.hidden = j.at("hidden").get<int64_t>();
    m.heads = j.at("heads").get<int64_t>();
    m.ffn_hidden = j.at("ffn_hidden").get<int64_t>();
    m.seq_len = j.at("seq_len").get<int64_t>();
    m.vocab = j.at("vocab").get<int64_t>();
    // Checkpoints written before the Llama family trained are GPT models with one kv head per head.
    const std::string family = j.value("family", std::string("gpt"));
    if (family != "gpt" && family != "llama") throw std::invalid_argument("unknown family '" + family + "'");
    m.family = family == "llama" ? ModelFamily::Llama : ModelFamily::GPT;
    m.kv_heads = j.value("kv_heads", m.heads);
    m.rope_theta = j.value("rope_theta", m.rope_theta);
    m.head_size = j.value("head_dim", int64_t(0));
    m.qk_norm = j.value("qk_norm", false);
    m.norm_eps = j.value("norm_epsilon", m.norm_eps);
    m.sliding_window = j.value("window_size", int64_t(0));
    m.full_attention_every = j.value("window_attn_skip_freq", int64_t(0));
    m.attention_sinks = j.value("attention_sinks", false);
    if (j.contains("qkv_bias")) m.qkv_bias = j.at("qkv_bias").get<bool>() ? 1 : 0;
    if (j.contains("proj_bias")) m.proj_bias = j.at("proj_bias").get<bool>() ? 1 : 0;
    if (j.contains("mlp_bias")) m.mlp_bias = j.at("mlp_bias").get<bool>() ? 1 : 0;
    m.router_bias = j.value("router_bias", false);
    m.activation_clamp = j.value("activation_clamp", 0.0);
    m.mtp_layers = j.value("mtp_layers", int64_t(0));
    m.q_lora_rank = j.value("q_lora_rank", int64_t(0));
    m.kv_lora_rank = j.value("kv_lora_rank", int64_t(0));
    m.qk_nope_head_dim = j.value("qk_nope_head_dim", int64_t(0));
    m.qk_rope_head_dim = j.value("qk_rope_head_dim", int64_t(0));
    m.v_head_dim = j.value("v_head_dim", int64_t(0));
    if (j.contains("rope_scaling")) {
      const auto& r = j.at("rope_scaling");
      RopeScaling& s = m.rope_scaling;
      s.type = r.at("type").get<std::string>();
      s.factor = r.at("factor").get<double>();
      s.original_max_position = r.at("original_max_position").get<int64_t>();
      if (s.type == "yarn") {
        s.beta_fast = r.at("beta_fast").get<double>(), s.beta_slow = r.at("beta_slow").get<double>();
        s.mscale = r.at("mscale").get<double>(), s.mscale_all_dim = r.at("mscale_all_dim").get<double>();
        s.truncate = r.at("truncate").get<bool>();
      } else {
        s.low_freq_factor = r.at("low_freq_factor").get<double>();
        s.high_freq_factor = r.at("high_freq_factor").get<double>();
      }
    }
    if (j.contains("tied_embeddings")) m.tied = j.at("tied_embeddings").get<bool>() ? 1 : 0;
    m.experts = j.value("experts", int64_t(0));
    m.router_score = j.value("router_score", m.router_score);
    m.router_expert_bias = j.value("router_expert_bias", false);
    m.router_groups = j.value("router_groups", int64_t(0));
    m.router_group_topk = j.value("router_group_topk", int64_t(0));
    m.router_topk_scaling = j.value("router_topk_scaling", 1.0);
    m.experts_per_token = j.value("experts_per_token", int64_t(0));
    m.expert_ffn_hidden = j.value("expert_ffn_hidden", int64_t(0));
    m.shared_experts = j.value("shared_experts", int64_t(0));
    m.moe_dense_layers = j.value("moe_dense_layers", int64_t(0));
    m.moe_layer_freq = j.value("moe_layer_freq", int64_t(1));  // checkpoints before it: every layer
    m.capacity_factor = j.value("capacity_factor", m.capacity_factor);
  } catch (const std::exception&) {
    // The JSON library's text names its own internals; say what a model description needs.
    Problems p;
    p.add("the checkpoint has no complete model description (meta.model needs name, layers, hidden, heads, "
              "ffn_hidden, seq_len and vocab; family gpt or llama)",
          "use a checkpoint written by trident train", "checkpoint-meta");
    p.throw_if_any();
  }
  return m;
}

nlohmann::json router_to_json(const nn::MoeOptions& o) {
  nlohmann::json j = {{"scores", o.sigmoid ? "sigmoid" : "softmax"}, {"normalise", o.normalise}, {"drop", o.drop},
                      {"aux_loss_coeff", o.aux_coeff}, {"z_loss_coeff", o.z_coeff}};
  if (o.expert_bias) j["bias_update_rate"] = o.bias_update_rate;
  return j;
}

void use_model_router(nn::MoeOptions& o, const ModelSpec& m) {
  o.sigmoid = m.router_score == "sigmoid";
  o.topk_scaling = m.router_topk_scaling;
  o.expert_bias = m.router_expert_bias;
  o.capacity_factor = m.capacity_factor;
  o.groups = m.router_groups, o.group_topk = m.router_group_topk;
}

std::vector<std::vector<float>> expert_bias_from_json(const nlohmann::json& meta, int64_t layers, int64_t experts) {
  std::vector<std::vector<float>> bias;
  try {
    bias = meta.at("router").at("expert_bias").get<std::vector<std::vector<float>>>();
  } catch (const std::exception&) {
  }
  bool ok = int64_t(bias.size()) == layers;
  for (const auto& b : bias) ok = ok && int64_t(b.size()) == experts;
  if (!ok) {
    Problems p;
    p.add("the checkpoint has no expert bias of " + std::to_string(layers) + " MoE layers x " + std::to_string(experts) +
              " experts (meta.router.expert_bias), which its router chooses its experts with",
          "use a checkpoint written by trident train with the expert bias", "checkpoint-expert-bias");
    p.throw_if_any();
  }
  return bias;
}

int64_t expert_bias_layers(const ModelSpec& m) {
  return m.moe_layers() + (m.layers > 0 && m.is_moe_layer(m.layers - 1) ? m.mtp_layers : 0);
}

nn::MoeOptions router_from_json(const nlohmann::json& j, const ModelSpec& m) {
  nn::MoeOptions o;
  use_model_router(o, m);
  if (j.is_null()) return o;
  std::string scores = "softmax";
  try {
    scores = j.value("scores", scores);
    o.normalise = j.value("normalise", o.normalise);
    o.drop = j.value("drop", o.drop);
    o.aux_coeff = j.value("aux_loss_coeff", o.aux_coeff);
    o.z_coeff = j.value("z_loss_coeff", o.z_coeff);
    o.bias_update_rate = j.value("bias_update_rate", o.bias_update_rate);
  } catch (const std::exception&) {
    Problems p;
    p.add("the checkpoint's router settings (meta.router) are not what train writes: " + j.dump().substr(0, 120),
          "use a checkpoint written by trident train", "checkpoint-meta");
    p.throw_if_any();
  }
  // The model's score function (meta.model.router_score) is what the runtime computes; a router
  // that says another would give other weights than it trained with.
  if (scores != m.router_score) {
    Problems p;
    p.add("the checkpoint's router scores its experts by '" + scores + "' (meta.router.scores), its model by '" +
              m.router_score + "' (meta.model.router_score)",
          "use a checkpoint written by trident train or import", "checkpoint-router");
    p.throw_if_any();
  }
  return o;
}

nlohmann::json tokenizer_to_json(const data::Tokenizer& t) {
  // A tokenizer.json as it was read: export writes it back byte for byte.
  if (t.hf()) return {{"kind", "hf-bpe"}, {"tokenizer_json", t.hf()->json_text()}};
  nlohmann::json merges = nlohmann::json::array();
  for (auto [a, b] : t.merges()) merges.push_back({a, b});
  return {{"kind", t.kind() == data::TokenizerKind::Bpe ? "bpe" : "bytes"}, {"merges", merges}};
}

data::Tokenizer tokenizer_from_json(const nlohmann::json& j) {
  if (j.is_object() && j.value("kind", std::string()) == "hf-bpe") {
    if (!j.contains("tokenizer_json") || !j["tokenizer_json"].is_string()) {
      Problems p;
      p.add("the checkpoint's tokenizer says hf-bpe but holds no tokenizer_json text", "import the model again",
            "checkpoint-meta");
      p.throw_if_any();
    }
    return data::Tokenizer::from_hf_json(j["tokenizer_json"].get<std::string>(), "the checkpoint's tokenizer.json");
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  if (j.is_object() && j.contains("merges")) {
    const nlohmann::json& list = j.at("merges");
    // Merge i joins two earlier tokens: a bytes id (< 256) or an earlier merge (< 256 + i).
    for (size_t i = 0; list.is_array() && i < list.size(); ++i) {
      const nlohmann::json& m = list[i];
      const int64_t next = 256 + int64_t(i);
      if (!m.is_array() || m.size() != 2 || !m[0].is_number_integer() || !m[1].is_number_integer() ||
          m[0].get<int64_t>() < 0 || m[1].get<int64_t>() < 0 || m[0].get<int64_t>() >= next ||
          m[1].get<int64_t>() >= next) {
        Problems p;
        p.add("the checkpoint's tokenizer has a bad merge " + std::to_string(i) + ": " + m.dump().substr(0, 60),
              "use a checkpoint written by trident train", "checkpoint-meta");
        p.throw_if_any();
      }
      merges.push_back({m[0].get<int32_t>(), m[1].get<int32_t>()});
    }
    if (!list.is_array()) {
      Problems p;
      p.add("the checkpoint's tokenizer merges are not a list", "use a checkpoint written by trident train",
            "checkpoint-meta");
      p.throw_if_any();
    }
  }
  return data::Tokenizer::from_merges(std::move(merges), "the checkpoint's tokenizer");
}

}  // namespace trident::engine
