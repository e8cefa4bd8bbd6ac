#include "core/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/options.h"
#include "core/rope_scaling.h"

namespace trident {

using json = nlohmann::json;

namespace {

// Keys that change neither memory, time nor the launched job: token ids, initialisation,
// inference caches, the checkpoint's dtype and library versions, classification heads.
const std::set<std::string> kHarmless = {
    "_name_or_path", "architectures", "auto_map", "model_type", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "initializer_factor", "use_cache",
    "pretraining_tp", "output_router_logits", "router_aux_loss_coef", "router_z_loss_coef", "aux_loss_alpha",
    "seq_aux", "ep_size", "id2label", "label2id", "task_specific_params", "summary_activation", "summary_first_dropout",
    "summary_proj_to_labels", "summary_type", "summary_use_proj", "scale_attn_weights", "reorder_and_upcast_attn",
    "scale_attn_by_inverse_layer_idx", "n_ctx", "quantization_config", "use_return_dict", "return_dict",
    "output_hidden_states", "output_attentions", "is_encoder_decoder", "tokenizer_class", "name_or_path",
    "initial_context_length", "router_jitter_noise", "attn_temperature_tuning", "floor_scale", "attn_scale", "for_llm_compressor",
    "attention_dropout", "hidden_dropout", "mlp_only_layers", "max_window_layers", "use_sliding_window",
    "embedding_multiplier_scale", "output_multiplier_scale", "attn_output_multiplier", "max_attn_value"};

// One config's keys, read once each; what is left over at the end and not harmless is refused.
class Reader {
 public:
  Reader(const json& j, std::string origin, Problems& p) : j_(j), origin_(std::move(origin)), p_(p) {}

  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  const json* raw(const std::string& k) {
    used_.insert(k);
    return has(k) ? &j_.at(k) : nullptr;
  }
  std::optional<int64_t> integer(const std::string& k, bool required = true) {
    const json* v = raw(k);
    if (!v) {
      if (required) p_.add(fmt::format("{} has no '{}'", origin_, k), fmt::format("add \"{}\" to the config", k), "hf-config-missing");
      return std::nullopt;
    }
    if (!v->is_number_integer() || v->get<int64_t>() < 0) {
      p_.add(fmt::format("'{}' in {} is {}, not a whole number of 0 or more", k, origin_, v->dump()),
             fmt::format("give \"{}\" an integer", k), "hf-config-value");
      return std::nullopt;
    }
    return v->get<int64_t>();
  }
  std::optional<double> number(const std::string& k) {
    const json* v = raw(k);
    if (!v) return std::nullopt;
    if (!v->is_number()) {
      p_.add(fmt::format("'{}' in {} is {}, not a number", k, origin_, v->dump()), fmt::format("give \"{}\" a number", k),
             "hf-config-value");
      return std::nullopt;
    }
    return v->get<double>();
  }
  std::optional<bool> boolean(const std::string& k) {
    const json* v = raw(k);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) {
      p_.add(fmt::format("'{}' in {} is {}, not true or false", k, origin_, v->dump()), "use true or false",
             "hf-config-value");
      return std::nullopt;
    }
    return v->get<bool>();
  }
  std::optional<std::string> text(const std::string& k) {
    const json* v = raw(k);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      p_.add(fmt::format("'{}' in {} is {}, not a string", k, origin_, v->dump()), "give it as a string", "hf-config-value");
      return std::nullopt;
    }
    return v->get<std::string>();
  }
  // A key whose value Trident cannot model: refused with what it is and why.
  void refuse(const std::string& k, const std::string& why, const std::string& fix) {
    p_.add(fmt::format("'{}' = {} in {}: {}", k, has(k) ? j_.at(k).dump() : "(absent)", origin_, why), fix,
           "hf-config-unsupported");
  }
  // Every key not read and not harmless, each by name.
  void finish() {
    for (const auto& [k, v] : j_.items()) {
      if (used_.count(k) || kHarmless.count(k)) continue;
      std::string shown = v.dump();
      if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
      p_.add(fmt::format("'{}' = {} in {} is a key Trident does not understand, and it may change the model's "
                         "memory, time or launch",
                         k, shown, origin_),
             "remove it from a copy of the config if it changes none of them, or describe the model with flags",
             "hf-config-unknown-key");
    }
  }
  const std::string& origin() const { return origin_; }
  Problems& problems() { return p_; }

 private:
  const json& j_;
  std::string origin_;
  Problems& p_;
  std::set<std::string> used_;
};

void read_rope_scaling(Reader& r, ModelSpec& m) {
  const json* v = r.raw("rope_scaling");
  if (!v) return;
  if (!v->is_object()) return r.refuse("rope_scaling", "not an object", "give rope_scaling as an object or null");
  std::string type = v->value("rope_type", v->value("type", std::string()));
  RopeScaling s;
  s.type = type;
  Reader y(*v, "rope_scaling of " + r.origin(), r.problems());  // its values' types checked by name
  s.factor = y.number("factor").value_or(1.0);
  std::set<std::string> keys = {"rope_type", "type", "factor"};
  if (type == "llama3") {
    s.low_freq_factor = v->value("low_freq_factor", 1.0);
    s.high_freq_factor = v->value("high_freq_factor", 4.0);
    s.original_max_position = v->value("original_max_position_embeddings", int64_t(8192));
    keys.insert({"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
  } else if (type == "yarn") {
    // Hugging Face's _compute_yarn_parameters: factor required; the original context defaults to
    // max_position_embeddings, beta_fast / beta_slow to 32 / 1, truncate to true; mscale and
    // mscale_all_dim only count together (else the attention factor is get_mscale(factor)).
    if (!v->contains("factor"))
      return r.refuse("rope_scaling", "yarn scaling without its 'factor'", "give rope_scaling a factor (DeepSeek-V3: 40)");
    s.original_max_position = y.integer("original_max_position_embeddings", false)
                                  .value_or(r.has("max_position_embeddings") && r.raw("max_position_embeddings")->is_number_integer()
                                                ? r.raw("max_position_embeddings")->get<int64_t>()
                                                : 0);
    s.beta_fast = y.number("beta_fast").value_or(32.0);
    s.beta_slow = y.number("beta_slow").value_or(1.0);
    s.mscale = y.number("mscale").value_or(1.0);
    s.mscale_all_dim = y.number("mscale_all_dim").value_or(0.0);
    s.truncate = y.boolean("truncate").value_or(true);
    // Without mscale Hugging Face's attention factor is get_mscale(factor), Megatron's and
    // modeling_deepseek's 1 / get_mscale(factor, mscale_all_dim): the two models differ.
    if (!y.has("mscale") && s.mscale_all_dim != 0)
      r.refuse("rope_scaling", "its mscale_all_dim without mscale: Hugging Face then scales cos and sin by "
               "get_mscale(factor), Megatron and modeling_deepseek by 1 / get_mscale(factor, mscale_all_dim)",
               "give mscale too (DeepSeek-V3: mscale 1.0 with mscale_all_dim 1.0)");
    if (!(s.factor >= 1 && s.original_max_position > 0 && s.beta_fast > 0 && s.beta_slow > 0))
      r.refuse("rope_scaling", "yarn needs a factor of 1 or more, a positive original_max_position_embeddings and "
               "positive beta_fast / beta_slow", "give DeepSeek-V3's values: factor 40, 4096, 32, 1");
    // An explicit attention factor is Hugging Face's override; Megatron and the runtime derive it
    // from factor, mscale and mscale_all_dim, so only that value is taken.
    if (auto a = y.number("attention_factor"); a && std::abs(*a - yarn::attention_factor(s)) > 1e-12 * std::abs(*a))
      r.refuse("rope_scaling", fmt::format("its attention_factor {} differs from {} derived from factor, mscale and "
                                           "mscale_all_dim (the one Megatron's yarn and the runtime apply)",
                                           *a, yarn::attention_factor(s)),
               "remove attention_factor from a copy of the config, or give the mscale / mscale_all_dim that yield it");
    keys.insert({"original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate",
                 "attention_factor"});
  } else if (type == "linear") {
  } else if (type == "default" || type.empty()) {
    s.type.clear();
  } else {
    return r.refuse("rope_scaling", "rope scaling type '" + type + "' is not one Trident models (linear, llama3, yarn)",
                    "remove rope_scaling from a copy of the config if training does not use it");
  }
  for (const auto& [k, x] : v->items())
    if (!keys.count(k))
      r.refuse("rope_scaling", "its key '" + k + "' is not understood",
               "remove it from a copy of the config if training does not use it");
  m.rope_scaling = s;
}

// An activation the family's MLP can stand for.
void read_activation(Reader& r, const char* key, const std::vector<std::string>& accepted) {
  auto act = r.text(key);
  if (act && std::find(accepted.begin(), accepted.end(), *act) == accepted.end())
    r.refuse(key, "this family's MLP is " + accepted.front() + "; another activation is a different model",
             "use " + join_choices(accepted));
}

ModelSpec read_gpt2(Reader& r) {
  ModelSpec m;
  m.family = ModelFamily::GPT;
  m.layers = r.integer("n_layer").value_or(0);
  m.hidden = r.integer("n_embd").value_or(0);
  m.heads = r.integer("n_head").value_or(0);
  m.kv_heads = m.heads;
  m.ffn_hidden = r.integer("n_inner", false).value_or(4 * m.hidden);
  m.seq_len = r.integer("n_positions").value_or(0);
  m.vocab = r.integer("vocab_size").value_or(0);
  m.norm_eps = r.number("layer_norm_epsilon").value_or(1e-5);
  read_activation(r, "activation_function", {"gelu_new", "gelu", "gelu_pytorch_tanh"});
  if (auto t = r.boolean("tie_word_embeddings")) m.tied = *t ? 1 : 0;
  double drop = 0;
  bool any = false;
  for (const char* k : {"resid_pdrop", "embd_pdrop", "attn_pdrop"})
    if (auto p = r.number(k)) drop = std::max(drop, *p), any = true;
  if (any) m.dropout = drop > 0 ? 1 : 0;
  return m;
}

// The keys every Llama-like config shares (Llama, Mistral, Mixtral, Qwen, DeepSeek, GPT-OSS, Grok, Nemotron).
ModelSpec read_llama_like(Reader& r) {
  ModelSpec m;
  m.family = ModelFamily::Llama;
  m.layers = r.integer("num_hidden_layers").value_or(0);
  m.hidden = r.integer("hidden_size").value_or(0);
  m.heads = r.integer("num_attention_heads").value_or(0);
  m.kv_heads = r.integer("num_key_value_heads", false).value_or(m.heads);
  m.ffn_hidden = r.integer("intermediate_size").value_or(0);
  m.seq_len = r.integer("max_position_embeddings").value_or(0);
  m.vocab = r.integer("vocab_size").value_or(0);
  if (auto x = r.integer("head_dim", false)) m.head_size = *x;
  for (const char* k : {"rms_norm_eps", "norm_eps", "layer_norm_eps"})
    if (auto e = r.number(k)) m.norm_eps = *e;
  if (auto t = r.number("rope_theta")) m.rope_theta = *t;
  read_rope_scaling(r, m);
  if (auto t = r.boolean("tie_word_embeddings")) m.tied = *t ? 1 : 0;
  if (auto b = r.boolean("attention_bias")) m.qkv_bias = m.proj_bias = *b ? 1 : 0;
  else m.qkv_bias = m.proj_bias = 0;
  if (auto b = r.boolean("mlp_bias")) m.mlp_bias = *b ? 1 : 0;
  if (auto d = r.number("attention_dropout"); d && *d > 0)
    r.refuse("attention_dropout", "attention dropout in a Llama-family model is not modelled", "set it to 0.0");
  // Sliding windows: Mistral's sliding_window, Qwen's only with use_sliding_window.
  const bool qwen_window = r.has("use_sliding_window");
  const bool use_window = qwen_window ? r.boolean("use_sliding_window").value_or(false) : true;
  if (auto w = r.integer("sliding_window", false); w && use_window && *w > 0) {
    m.sliding_window = *w;
    if (qwen_window && r.has("max_window_layers"))
      r.refuse("max_window_layers", "Qwen's windowed layers after max_window_layers are not modelled",
               "set use_sliding_window to false (Qwen's released models train without it)");
  }
  return m;
}

// The leading layers a list of dense-MLP layer indices keeps dense (mlp_only_layers), or refused.
void read_dense_layer_list(Reader& r, ModelSpec& m) {
  const json* v = r.raw("mlp_only_layers");
  if (!v || (v->is_array() && v->empty())) return;
  int64_t k = 0;
  bool leading = v->is_array();
  if (leading)
    for (const auto& x : *v) leading = leading && x.is_number_integer() && x.get<int64_t>() == k++;
  if (!leading)
    return r.refuse("mlp_only_layers", "dense layers other than the leading ones are not modelled",
                    "give leading layers only ([0, 1, ..., k-1])");
  m.moe_dense_layers = k;
}

// HF's Qwen MoE and Llama 4 make layer l a MoE layer when (l + 1) % step == 0: phase step - 1.
void set_moe_step(ModelSpec& m, int64_t step) {
  m.moe_layer_freq = std::max<int64_t>(step, 1);
  m.moe_layer_phase = m.moe_layer_freq - 1;
}

ModelSpec read_family(const std::string& type, Reader& r, std::optional<int64_t> seq_len) {
  if (type == "gpt2") {
    ModelSpec g = read_gpt2(r);
    if (seq_len) g.seq_len = *seq_len;
    return g;
  }
  ModelSpec m = read_llama_like(r);
  if (seq_len) m.seq_len = *seq_len;
  if (type == "llama" || type == "mistral") {
    read_activation(r, "hidden_act", {"silu"});
  } else if (type == "mixtral") {
    read_activation(r, "hidden_act", {"silu"});
    m.experts = r.integer("num_local_experts").value_or(0);
    m.experts_per_token = r.integer("num_experts_per_tok").value_or(0);
    m.expert_ffn_hidden = m.ffn_hidden;
    m.router_norm_topk = true;
  } else if (type == "qwen2" || type == "qwen3") {
    read_activation(r, "hidden_act", {"silu"});
    if (type == "qwen2") m.qkv_bias = 1;  // Qwen2's attention has Q, K, V biases (no key says so)
    m.qk_norm = type == "qwen3";
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    read_activation(r, "hidden_act", {"silu"});
    if (type == "qwen2_moe") m.qkv_bias = 1;
    m.qk_norm = type == "qwen3_moe";
    m.experts = r.integer("num_experts").value_or(0);
    m.experts_per_token = r.integer("num_experts_per_tok").value_or(0);
    m.expert_ffn_hidden = r.integer("moe_intermediate_size").value_or(0);
    if (auto s = r.integer("shared_expert_intermediate_size", false); s && *s > 0)
      m.shared_experts = 1, m.shared_expert_ffn_hidden = *s, m.shared_expert_gate = true;
    set_moe_step(m, r.integer("decoder_sparse_step", false).value_or(1));
    read_dense_layer_list(r, m);
    if (m.moe_dense_layers > 0 && m.moe_layer_freq > 1)
      r.refuse("mlp_only_layers", "leading dense layers together with decoder_sparse_step > 1 are not modelled",
               "use one of the two");
    m.router_norm_topk = r.boolean("norm_topk_prob").value_or(false);
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    read_activation(r, "hidden_act", {"silu"});
    m.q_lora_rank = r.integer("q_lora_rank", false).value_or(0);
    m.kv_lora_rank = r.integer("kv_lora_rank").value_or(0);
    m.qk_nope_head_dim = r.integer("qk_nope_head_dim").value_or(0);
    m.qk_rope_head_dim = r.integer("qk_rope_head_dim").value_or(0);
    m.v_head_dim = r.integer("v_head_dim").value_or(0);
    m.head_size = m.qk_nope_head_dim + m.qk_rope_head_dim;  // the query/key head width the scores are taken over
    m.kv_heads = m.heads;
    m.experts = r.integer("n_routed_experts").value_or(0);
    m.shared_experts = r.integer("n_shared_experts", false).value_or(0);
    m.expert_ffn_hidden = r.integer("moe_intermediate_size").value_or(0);
    m.experts_per_token = r.integer("num_experts_per_tok").value_or(0);
    m.moe_dense_layers = r.integer("first_k_dense_replace", false).value_or(0);
    if (auto f = r.integer("moe_layer_freq", false); f && *f != 1)
      r.refuse("moe_layer_freq", "DeepSeek's MoE layer frequency other than 1 is not modelled", "use 1");
    m.router_score = r.text("scoring_func").value_or("softmax");
    // DeepSeek-V3's configuration class defaults to noaux_tc (its gate always has the bias), V2's to greedy.
    const std::string method = r.text("topk_method").value_or(type == "deepseek_v3" ? "noaux_tc" : "greedy");
    if (method == "noaux_tc") m.router_expert_bias = true;
    else if (method != "greedy" && method != "group_limited_greedy")
      r.refuse("topk_method", "routing method '" + method + "' is unknown", "use greedy, group_limited_greedy or noaux_tc");
    m.router_groups = r.integer("n_group", false).value_or(0);
    m.router_group_topk = r.integer("topk_group", false).value_or(0);
    if (m.router_groups <= 1) m.router_groups = m.router_group_topk = 0;
    m.router_topk_scaling = r.number("routed_scaling_factor").value_or(1.0);
    m.router_norm_topk = r.boolean("norm_topk_prob").value_or(false);
    m.mtp_layers = r.integer("num_nextn_predict_layers", false).value_or(0);
  } else if (type == "gpt_oss") {
    read_activation(r, "hidden_act", {"silu"});
    m.experts = r.integer("num_local_experts").value_or(0);
    m.experts_per_token = r.integer(r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token").value_or(0);
    r.raw("experts_per_token");
    m.expert_ffn_hidden = m.ffn_hidden;
    m.mlp_bias = 1;     // gate_up_proj_bias and down_proj_bias on every expert
    m.router_bias = true;
    m.attention_sinks = true;  // a learned logit per head ("sinks")
    m.router_norm_topk = true;
    m.activation_clamp = r.number("swiglu_limit").value_or(0.0);  // no change to cost; written in the launch
    if (const json* lt = r.raw("layer_types")) {
      // "sliding_attention" / "full_attention" per layer: expressible when the full layers are every N-th.
      int64_t every = 0;
      bool ok = lt->is_array() && int64_t(lt->size()) == m.layers;
      for (size_t l = 0; ok && l < lt->size(); ++l)
        if ((*lt)[l] == "full_attention" && every == 0) every = int64_t(l) + 1;
      for (size_t l = 0; ok && l < lt->size(); ++l) {
        const bool full = (*lt)[l] == "full_attention";
        ok = (full || (*lt)[l] == "sliding_attention") && full == (every > 0 && (int64_t(l) + 1) % every == 0);
      }
      if (!ok)
        r.refuse("layer_types", "the pattern of full and sliding-window layers is not 'every N-th layer full'",
                 "Trident models full attention on every N-th layer (Megatron's window_attn_skip_freq)");
      m.full_attention_every = every;
    }
  } else if (type == "llama4_text") {
    read_activation(r, "hidden_act", {"silu"});
    m.expert_ffn_hidden = m.ffn_hidden;  // Llama 4: intermediate_size is the experts', intermediate_size_mlp the dense layers'
    m.ffn_hidden = r.integer("intermediate_size_mlp").value_or(0);
    m.experts = r.integer("num_local_experts").value_or(0);
    m.experts_per_token = r.integer("num_experts_per_tok").value_or(0);
    m.shared_experts = 1;  // Llama 4's MoE layer always adds one shared expert of the experts' width
    m.router_score = "sigmoid";
    const int64_t step = r.integer("interleave_moe_layer_step", false).value_or(1);
    set_moe_step(m, step);
    if (const json* ml = r.raw("moe_layers")) {
      bool ok = ml->is_array();
      int64_t n = 0;
      for (size_t i = 0; ok && i < ml->size(); ++i) ok = (*ml)[i].is_number_integer() && m.is_moe_layer((*ml)[i].get<int64_t>()), ++n;
      if (!ok || n != m.moe_layers())
        r.refuse("moe_layers", "the list of MoE layers is not every interleave_moe_layer_step-th layer",
                 "Trident models MoE layers every N-th layer");
    }
    if (r.boolean("use_qk_norm").value_or(false))
      r.refuse("use_qk_norm", "Llama 4's weightless L2 norm of queries and keys is not modelled", "set it to false");
    if (auto chunk = r.integer("attention_chunk_size", false); chunk && *chunk < m.seq_len)
      r.refuse("attention_chunk_size",
               fmt::format("chunked local attention ({} tokens) on the RoPE layers is not modelled, and the config's "
                           "context ({}) is longer",
                           *chunk, m.seq_len),
               fmt::format("give --seq-len {} or less (the training sequence length)", *chunk));
    r.raw("no_rope_layers");  // which layers skip RoPE: no change to cost
    r.raw("nope_layer_interval");
  } else if (type == "grok-1") {
    m.experts = r.integer("num_experts").value_or(0);
    m.experts_per_token = r.integer("num_experts_per_tok").value_or(0);
    m.expert_ffn_hidden = m.ffn_hidden;
    if (m.tied < 0) m.tied = 1;  // Grok-1's output layer is the embedding transposed
  } else if (type == "nemotron") {
    read_activation(r, "hidden_act", {"relu2"});
    m.gated_mlp = 0;
    m.layer_norm = 1;  // LayerNorm1P: weight and bias
    m.activation = "relu2";
    m.rotary_percent = r.number("partial_rotary_factor").value_or(1.0);
  } else {
    r.problems().add("model_type '" + type + "' in " + r.origin() + " is not a family Trident reads",
                     "use a config of gpt2, llama, llama4, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, "
                     "deepseek_v2, deepseek_v3, gpt_oss, grok-1 or nemotron, or describe the model with flags",
                     "hf-config-family");
  }
  return m;
}

}  // namespace

bool looks_like_json(const std::string& text) {
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) return c == '{';
  return false;
}

std::optional<ModelSpec> model_from_hf_config(const std::string& text, const std::string& origin, Problems& p,
                                              std::optional<int64_t> seq_len) {
  const json root = json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    p.add(origin + " is not a JSON object (a Hugging Face config.json)", "give the model's config.json",
          "hf-config-json");
    return std::nullopt;
  }
  const size_t before = p.size();
  const json* cfg = &root;
  std::string type = root.value("model_type", std::string());
  std::string note;
  // Llama 4 is multimodal: its language model is text_config (the vision encoder is not planned).
  if (type == "llama4" && root.contains("text_config") && root["text_config"].is_object()) {
    cfg = &root["text_config"];
    type = cfg->value("model_type", std::string("llama4_text"));
    note = " (text model)";
  }
  if (type.empty()) {
    p.add(origin + " has no model_type", "give the model's own config.json (it names its model_type)", "hf-config-family");
    return std::nullopt;
  }
  Reader r(*cfg, origin, p);
  ModelSpec m = read_family(type, r, seq_len);
  r.finish();
  std::string name = root.value("_name_or_path", std::string());
  if (name.empty()) {
    name = origin;
    if (auto slash = name.find_last_of('/'); slash != std::string::npos) name = name.substr(slash + 1);
    name = type + " (" + name + ")";
  }
  m.name = name + note;
  if (p.size() > before) return std::nullopt;
  validate_model(m, p);
  if (p.size() > before) return std::nullopt;
  return m;
}

std::optional<ModelSpec> model_from_hf_config_file(const std::string& path, const std::string& flag, Problems& p,
                                                   std::optional<int64_t> seq_len) {
  auto text = read_settings_file(path, "Hugging Face config", flag, "hf-config-file", p);
  if (!text) return std::nullopt;
  return model_from_hf_config(*text, path, p, seq_len);
}

}  // namespace trident
