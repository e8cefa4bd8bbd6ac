// The model of a run from its flags, keys, preset or Hugging Face config.json (resolve_model):
// the shape, the attention variant (MLA, rope scaling) and the mixture of experts, each flag
// checked against the model it changes. The cluster, layout and execution are run_spec.cpp.
#include "core/run_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "core/checked_size.h"
#include "core/count_text.h"
#include "core/dimensions.h"
#include "core/hf_config.h"
#include "core/layout_rules.h"
#include "core/suggest.h"
#include "core/units.h"

namespace trident {

// Llama 3.1's rope scaling from the flags: --rope-scaling-factor turns it on (Megatron's
// --use-rope-scaling with its fixed 1 / 4 / 8192 as defaults); the other three refine it, and
// given alone (no factor, no scaling in the config) they would change nothing: refused by name.
// Multi-head latent attention (Megatron's flags and defaults): --multi-latent-attention turns it
// on (kv_lora_rank 32, heads of 128 + 64, values of 128 unless given or the config's); the sizes
// change an MLA model's (a config's or the flag's) and are refused on any other.
static void read_mla_flags(const OptionValues& v, ModelSpec& m, Problems& p) {
  const char* sizes[] = {"q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim"};
  const std::optional<bool> on = v.get_bool("multi-latent-attention", p);
  if (on && !*on && m.is_mla()) {
    p.add(fmt::format("--multi-latent-attention false (from {}), but {} has multi-head latent attention (kv_lora_rank "
                      "{}): it would be another model", v.source("multi-latent-attention"), m.name, m.kv_lora_rank),
          "drop --multi-latent-attention, or describe a model without MLA by its sizes", "mla-flags");
    return;
  }
  if (on && *on && !m.is_mla()) {
    m.kv_lora_rank = 32, m.qk_nope_head_dim = 128, m.qk_rope_head_dim = 64, m.v_head_dim = 128, m.q_lora_rank = 0;
  }
  if (!m.is_mla()) {
    for (const char* name : sizes)
      if (v.has(name))
        p.add(fmt::format("--{} (from {}) sizes multi-head latent attention, which the model does not have", name,
                          v.source(name)),
              fmt::format("add --multi-latent-attention, or drop --{}", name), "mla-flags");
    return;
  }
  if (auto x = v.get_int("q-lora-rank", p)) m.q_lora_rank = *x;
  if (auto x = v.get_int("kv-lora-rank", p)) m.kv_lora_rank = *x;
  if (auto x = v.get_int("qk-head-dim", p)) m.qk_nope_head_dim = *x;
  if (auto x = v.get_int("qk-pos-emb-head-dim", p)) m.qk_rope_head_dim = *x;
  if (auto x = v.get_int("v-head-dim", p)) m.v_head_dim = *x;
}

static void read_rope_scaling_flags(const OptionValues& v, ModelSpec& m, Problems& p) {
  const char* refine[] = {"rope-low-freq-factor", "rope-high-freq-factor", "rope-original-max-position"};
  if (auto f = v.get_double("rope-scaling-factor", p)) {
    if (!m.rope_scaling.type.empty() && m.rope_scaling.type != "llama3") {
      p.add(fmt::format("--rope-scaling-factor (from {}) sets Llama 3.1's rope scaling, but the model's config has "
                        "'{}' scaling", v.source("rope-scaling-factor"), m.rope_scaling.type),
            "drop --rope-scaling-factor, or remove rope_scaling from a copy of the config", "rope-scaling-flags");
      return;
    }
    if (m.rope_scaling.type.empty()) m.rope_scaling = RopeScaling{"llama3", 1.0, 1.0, 4.0, 8192};
    m.rope_scaling.factor = *f;
  }
  if (m.rope_scaling.type != "llama3") {
    for (const char* name : refine)
      if (v.has(name))
        p.add(fmt::format("--{} (from {}) refines Llama 3.1's rope scaling, which the model does not have",
                          name, v.source(name)),
              fmt::format("add --rope-scaling-factor F (Llama 3.1: 8), or drop --{}", name), "rope-scaling-flags");
    return;
  }
  if (auto x = v.get_double("rope-low-freq-factor", p)) m.rope_scaling.low_freq_factor = *x;
  if (auto x = v.get_double("rope-high-freq-factor", p)) m.rope_scaling.high_freq_factor = *x;
  if (auto x = v.get_int("rope-original-max-position", p)) m.rope_scaling.original_max_position = *x;
}

// YaRN by Megatron's flags (--rope-type yarn, --rotary-scaling-factor, --yarn-*, --mscale*): over
// a config's yarn they override its fields; without yarn each refinement is refused by name.
static void read_yarn_flags(const OptionValues& v, ModelSpec& m, Problems& p) {
  RopeScaling& r = m.rope_scaling;
  if (auto t = v.get_string("rope-type")) {
    if (*t != "rope" && *t != "yarn") {
      p.add(fmt::format("--rope-type '{}' (from {}) is unknown", *t, v.source("rope-type")), "use rope or yarn", "rope-scaling-flags");
      return;
    }
    if (*t == "yarn" && !r.type.empty() && r.type != "yarn") {
      p.add(fmt::format("--rope-type yarn (from {}) with the model's '{}' rope scaling: one scaling at a time",
                        v.source("rope-type"), r.type),
            "drop --rope-type yarn or --rope-scaling-factor (or the config's rope_scaling)", "rope-scaling-flags");
      return;
    }
    if (*t == "yarn" && r.type.empty()) r = RopeScaling{"yarn", 1.0, 1.0, 1.0, 4096, 32.0, 1.0, 1.0, 0.0, true};
    if (*t == "rope" && r.type == "yarn") r = RopeScaling{};
  }
  const char* refine[] = {"rotary-scaling-factor", "yarn-original-max-position-embeddings", "yarn-beta-fast",
                          "yarn-beta-slow", "mscale", "mscale-all-dim", "yarn-correction-range-round-to-int"};
  if (r.type != "yarn") {
    for (const char* name : refine)
      if (v.has(name))
        p.add(fmt::format("--{} (from {}) sets YaRN's rope scaling, which the model does not have", name, v.source(name)),
              fmt::format("add --rope-type yarn, or drop --{}", name), "rope-scaling-flags");
    return;
  }
  if (auto x = v.get_double("rotary-scaling-factor", p)) r.factor = *x;
  if (auto x = v.get_int("yarn-original-max-position-embeddings", p)) r.original_max_position = *x;
  if (auto x = v.get_double("yarn-beta-fast", p)) r.beta_fast = *x;
  if (auto x = v.get_double("yarn-beta-slow", p)) r.beta_slow = *x;
  if (auto x = v.get_double("mscale", p)) r.mscale = *x;
  if (auto x = v.get_double("mscale-all-dim", p)) r.mscale_all_dim = *x;
  if (auto x = v.get_bool("yarn-correction-range-round-to-int", p)) r.truncate = *x;
}

ModelSpec resolve_model(const OptionValues& v, Problems& p) {
  ModelSpec m;
  auto preset = v.get_string("model");
  const auto hf = v.get_string("hf-config");
  bool described = v.has("layers") || v.has("hidden") || v.has("heads");
  if (preset && hf) {
    p.add(fmt::format("--model {} (from {}) and --hf-config {} (from {}) both name the model", *preset, v.source("model"),
                      *hf, v.source("hf-config")),
          "keep one of them", "model-twice");
    return m;
  }
  if (hf) {
    Problems q, said_below;  // a bad --seq-len is reported once, where it is read below
    std::optional<int64_t> seq;
    if (v.has("seq-len")) seq = v.get_int("seq-len", said_below);
    auto read = model_from_hf_config_file(*hf, "--hf-config", q, seq);
    p.add_all(q);
    if (!read) return m;
    m = *read;
    preset = m.name;  // flags below override its sizes, as they do a preset's
  } else if (preset) {
    if (!is_model_preset(*preset)) {
      p.add("unknown model preset '" + *preset + "'",
            did_you_mean(*preset, model_preset_names()) + "use one of " + join_choices(model_preset_names()) +
                ", or describe the model with --layers --hidden --heads", "unknown-preset");
      return m;
    }
    m = model_preset(*preset);
  } else if (!described) {
    p.add("no model given", "pass --model NAME (e.g. --model gpt3-175b) or --layers --hidden --heads",
          "no-model");
    return m;
  } else {
    m.seq_len = 2048;
    m.vocab = 50257;
  }
  if (auto f = v.get_string("family")) {
    if (*f == "gpt") m.family = ModelFamily::GPT;
    else if (*f == "llama") m.family = ModelFamily::Llama;
    else p.add("--family '" + *f + "' is unknown", "use --family gpt or --family llama");
  }
  const bool heads_given = v.has("heads"), hidden_given = v.has("hidden");
  if (auto x = v.get_int("layers", p)) m.layers = *x;
  if (auto x = v.get_int("hidden", p)) m.hidden = *x;
  if (auto x = v.get_int("heads", p)) m.heads = *x;
  if (auto x = v.get_int("seq-len", p)) m.seq_len = *x;
  if (auto x = v.get_int("vocab", p)) m.vocab = *x;
  if (auto x = v.get_bool("tied-embeddings", p)) m.tied = *x ? 1 : 0;
  if (auto x = v.get_int("head-dim", p)) m.head_size = *x;
  if (auto x = v.get_bool("qk-norm", p)) m.qk_norm = *x;
  if (auto x = v.get_double("rope-theta", p)) m.rope_theta = *x;
  if (auto x = v.get_double("norm-epsilon", p)) m.norm_eps = *x;
  if (auto x = v.get_int("window-size", p)) m.sliding_window = *x;
  if (auto x = v.get_int("window-attn-skip-freq", p)) m.full_attention_every = *x;
  if (auto x = v.get_bool("attention-sinks", p)) m.attention_sinks = *x;
  // Biases as Megatron's two switches set them: every linear layer's, or q/k/v's alone.
  if (auto x = v.get_bool("add-bias-linear", p)) {
    m.qkv_bias = m.proj_bias = m.mlp_bias = *x ? 1 : 0;
    m.router_bias = *x;
  }
  if (auto x = v.get_bool("add-qkv-bias", p)) m.qkv_bias = *x ? 1 : 0;
  if (auto x = v.get_double("activation-func-clamp-value", p)) m.activation_clamp = *x;
  read_rope_scaling_flags(v, m, p);
  read_yarn_flags(v, m, p);
  if (auto x = v.get_int("mtp-num-layers", p)) m.mtp_layers = *x;
  read_mla_flags(v, m, p);
  // Dependent sizes follow the overridden ones unless given themselves.
  if (auto x = v.get_int("kv-heads", p)) m.kv_heads = *x;
  else if (!preset || (heads_given && m.family == ModelFamily::GPT)) m.kv_heads = m.heads;
  if (auto x = v.get_int("ffn-hidden", p)) m.ffn_hidden = *x;
  else if (!preset || (hidden_given && m.family == ModelFamily::GPT)) m.ffn_hidden = 4 * m.hidden;
  const bool moe_given = v.has("experts") || v.has("experts-per-token") || v.has("expert-ffn-hidden") ||
                         v.has("shared-experts") || v.has("moe-dense-layers") || v.has("moe-layer-freq") ||
                         v.has("capacity-factor") || v.has("moe-router-score-function") ||
                         v.has("moe-router-enable-expert-bias") || v.has("moe-router-topk-scaling-factor") ||
                         v.has("moe-router-num-groups") || v.has("moe-router-group-topk");
  if (auto x = v.get_int("experts", p)) m.experts = *x;
  if (auto x = v.get_int("experts-per-token", p)) m.experts_per_token = *x;
  else if (m.experts > 0 && m.experts_per_token == 0) m.experts_per_token = std::min<int64_t>(2, m.experts);
  if (auto x = v.get_int("expert-ffn-hidden", p)) m.expert_ffn_hidden = *x;
  else if (m.experts > 0 && m.expert_ffn_hidden == 0) m.expert_ffn_hidden = m.ffn_hidden;
  if (auto x = v.get_int("shared-experts", p)) m.shared_experts = *x;
  if (auto x = v.get_int("moe-dense-layers", p)) m.moe_dense_layers = *x;
  if (auto x = v.get_int("moe-layer-freq", p)) m.moe_layer_freq = *x;
  if (auto x = v.get_double("capacity-factor", p)) m.capacity_factor = *x;
  if (auto x = v.get_double("moe-load-imbalance", p)) m.moe_load_imbalance = *x;
  if (auto s = v.get_string("moe-router-score-function")) {
    if (*s == "softmax" || *s == "sigmoid") m.router_score = *s;
    else p.add("--moe-router-score-function '" + *s + "' is unknown", "use softmax or sigmoid", "router-score");
  }
  if (auto b = v.get_bool("moe-router-enable-expert-bias", p)) m.router_expert_bias = *b;
  if (auto x = v.get_double("moe-router-topk-scaling-factor", p)) m.router_topk_scaling = *x;
  if (auto x = v.get_int("moe-router-num-groups", p)) m.router_groups = *x;
  if (auto x = v.get_int("moe-router-group-topk", p)) m.router_group_topk = *x;
  if (!preset) {
    m.name = "custom";
    size_t before = p.size();
    if (!v.has("layers")) p.add("custom model has no --layers", "give --layers, or use --model NAME");
    if (!v.has("hidden")) p.add("custom model has no --hidden", "give --hidden, or use --model NAME");
    if (!v.has("heads")) p.add("custom model has no --heads", "give --heads, or use --model NAME");
    if (p.size() > before) return m;  // the missing sizes say it all
  } else if (described || (v.has("seq-len") && !hf) || v.has("vocab") || v.has("ffn-hidden") || v.has("kv-heads") ||
             v.has("head-dim") || moe_given) {
    m.name += " (modified)";
  }
  // Settings of mixture-of-experts layers on a dense model would change nothing: refused.
  if (!m.is_moe())
    for (const char* name : {"experts-per-token", "expert-ffn-hidden", "shared-experts", "moe-dense-layers", "moe-layer-freq",
                             "capacity-factor", "moe-load-imbalance", "moe-router-score-function",
                             "moe-router-enable-expert-bias", "moe-router-topk-scaling-factor", "moe-router-num-groups",
                             "moe-router-group-topk"})
      if (v.has(name))
        p.add(fmt::format("--{} (from {}) applies to mixture-of-experts layers, but {} is dense (it has no experts)",
                          name, v.source(name), m.name.empty() ? "the model" : m.name),
              fmt::format("drop --{}, or give the model experts (--experts N)", name), "moe-settings-on-dense");
  // Group-limited routing: groups tiling the experts, a token's k experts in group_topk of them
  // (k / group_topk from each group's score, Megatron-Core's group_limited_topk).
  if (m.is_moe() && (m.router_groups > 0 || m.router_group_topk > 0)) {
    const int64_t G = m.router_groups, M = m.router_group_topk, E = m.experts, k = m.experts_per_token;
    if (G <= 1 || E % G != 0 || M < 1 || M > G || k % M != 0 || k > M * (E / G))
      p.add(fmt::format("group-limited routing with {} groups, top {} groups, of {} experts, top-{}: the groups must "
                        "tile the experts (groups > 1 dividing {}), 1 <= top groups <= groups, and the top-{} must be "
                        "whole per chosen group (top groups dividing {}) and fit in them",
                        G, M, E, k, E, k, k),
            "give --moe-router-num-groups G and --moe-router-group-topk M with G dividing the experts and M dividing "
            "--experts-per-token (DeepSeek-V3: 256 experts, top-8, 8 groups, top 4)",
            "router-groups");
  }
  validate_model(m, p);
  return m;
}

}  // namespace trident
