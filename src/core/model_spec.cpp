#include "core/model_spec.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/checked_size.h"

namespace trident {

std::string to_string(ModelFamily family) { return family == ModelFamily::GPT ? "gpt" : "llama"; }

ParamCount count_parameters(const ModelSpec& m) {
  // Every term in checked arithmetic: sizes that each fit an int still overflow 64 bits when
  // multiplied (layers x hidden^2), and a wrapped count would print as a negative model.
  using C = CheckedCount;
  const C h = m.hidden, f = m.ffn_hidden, q = C(m.heads) * C(m.head_dim()), kv = C(m.kv_heads) * C(m.head_dim());
  const C V = m.vocab, L = m.layers;
  const C qkv_bias = m.has_qkv_bias() ? 1 : 0, proj_bias = m.has_proj_bias() ? 1 : 0, mlp_bias = m.has_mlp_bias() ? 1 : 0;
  C attention = 0;
  if (m.is_mla()) {
    // MLA: queries from h (or through the q_lora_rank latent and its RMSNorm) to heads x (nope + rope);
    // the kv latent (kv_lora_rank, RMSNorm) plus one shared rope key from h; keys' nope part and
    // values up from the latent; the output projection from heads x v_head_dim.
    const C H = m.heads, qk = C(m.qk_nope_head_dim) + C(m.qk_rope_head_dim), qr = m.q_lora_rank, kvr = m.kv_lora_rank;
    attention = (m.q_lora_rank > 0 ? h * qr + qr + qr * H * qk : h * H * qk) + h * (kvr + C(m.qk_rope_head_dim)) +
                kvr + kvr * H * (C(m.qk_nope_head_dim) + C(m.v_head_dim)) + H * C(m.v_head_dim) * h + proj_bias * h;
  } else {
    // Q is h x (heads x head_dim), K and V are h x kv each, the output projection (heads x head_dim) x h.
    attention = h * (q + C(2) * kv) + qkv_bias * (q + C(2) * kv) + q * h + proj_bias * h;
  }
  if (m.qk_norm) attention = attention + C(2) * C(m.head_dim());  // one RMSNorm weight for queries, one for keys
  if (m.attention_sinks) attention = attention + C(m.heads);
  // GELU MLP: h->f and f->h. SwiGLU: gate and up h->f, down f->h. Biases on every output when it has them.
  auto mlp_of = [&](const C& width) { return C(m.mlp_matrices()) * h * width + mlp_bias * (C(m.mlp_matrices() - 1) * width + h); };
  const C mlp = mlp_of(f);
  // Two norms per layer: LayerNorm has weight and bias, RMSNorm only a weight.
  const C norm = m.has_layer_norm() ? C(2) * h : h;
  const C norms = C(2) * norm;
  const C dense_layer = attention + mlp + norms;
  const C token_embedding = V * h;
  const C position_embedding = m.learned_positions() ? C(m.seq_len) * h : C(0);
  const C final_norm = norm;
  const C output_layer = m.tied_embeddings() ? C(0) : V * h;
  const C ends = token_embedding + position_embedding + final_norm + output_layer;
  C per_layer = dense_layer, total = L * dense_layer + ends, active = total;
  C router = 0, expert = 0, routed = 0, shared = 0;
  if (m.is_moe()) {
    // A MoE layer: the router (h -> experts, its bias and score-correction bias when it has
    // them), the routed and the shared experts (with their gate when they have one).
    const C E = m.experts;
    router = h * E + C(m.router_bias ? 1 : 0) * E + C(m.router_expert_bias ? 1 : 0) * E;
    expert = mlp_of(m.expert_ffn_hidden);
    routed = E * expert;
    shared = C(m.shared_experts) * mlp_of(m.shared_expert_width()) + (m.shared_expert_gate ? h : C(0));
    per_layer = attention + router + routed + shared + norms;
    total = C(m.layers - m.moe_layers()) * dense_layer + C(m.moe_layers()) * per_layer + ends;
    active = total - C(m.moe_layers()) * (E - C(m.experts_per_token)) * expert;
  }
  const C mtp = C(m.mtp_layers) * (C(2) * h + C(2) * h * h + (m.is_moe() ? per_layer : dense_layer) + norm);
  // The message is built only when something overflowed: the planner counts parameters for every
  // candidate it estimates.
  std::string what;
  for (const C& x : {total, active, attention, mlp, norms, per_layer, token_embedding, position_embedding, final_norm,
                     output_layer, dense_layer, router, expert, routed, shared, mtp})
    if (!x.ok() && what.empty())
      what = "the parameter count of " + m.name + " (" + std::to_string(m.layers) + " layers, hidden " +
             std::to_string(m.hidden) + ", ffn " + std::to_string(m.ffn_hidden) + ", vocab " +
             std::to_string(m.vocab) + (m.is_moe() ? ", " + std::to_string(m.experts) + " experts" : "") + ")";
  ParamCount c;
  c.total = total.value(what);  // throws InputError naming the sizes when anything overflowed
  c.active = active.value(what);
  c.attention_per_layer = attention.value(what);
  c.mlp_per_layer = mlp.value(what);
  c.norms_per_layer = norms.value(what);
  c.per_layer = per_layer.value(what);
  c.token_embedding = token_embedding.value(what);
  c.position_embedding = position_embedding.value(what);
  c.final_norm = final_norm.value(what);
  c.output_layer = output_layer.value(what);
  c.mtp = mtp.value(what);
  if (m.is_moe()) {
    c.dense_layer = dense_layer.value(what);
    c.router_per_layer = router.value(what);
    c.expert_params = expert.value(what);
    c.routed_experts_per_layer = routed.value(what);
    c.shared_experts_per_layer = shared.value(what);
  }
  return c;
}

namespace {

ModelSpec gpt(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t seq,
              int64_t vocab) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::GPT;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.seq_len = seq;
  m.vocab = vocab;
  return m;
}

ModelSpec llama(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                int64_t ffn, int64_t seq, int64_t vocab, double rope_theta = 10000.0) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::Llama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.seq_len = seq;
  m.vocab = vocab;
  m.rope_theta = rope_theta;
  return m;
}

ModelSpec moe(ModelSpec m, int64_t experts, int64_t top_k, int64_t expert_ffn, int64_t shared = 0,
              int64_t dense_layers = 0) {
  m.experts = experts;
  m.experts_per_token = top_k;
  m.expert_ffn_hidden = expert_ffn;
  m.shared_experts = shared;
  m.moe_dense_layers = dense_layers;
  return m;
}

const std::map<std::string, ModelSpec>& presets() {
  static const std::map<std::string, ModelSpec> table = [] {
    std::map<std::string, ModelSpec> t;
    auto put = [&](ModelSpec m) { t.emplace(m.name, std::move(m)); };
    // GPT-3 paper (Brown et al. 2020, Table 2.1): seq 2048, vocab 50257. The paper lists 13B
    // with d_model 5140, which 40 heads do not divide; we use 5120 as Megatron does.
    put(gpt("gpt3-125m", 12, 768, 12, 2048, 50257));
    put(gpt("gpt3-350m", 24, 1024, 16, 2048, 50257));
    put(gpt("gpt3-760m", 24, 1536, 16, 2048, 50257));
    put(gpt("gpt3-1.3b", 24, 2048, 16, 2048, 50257));
    put(gpt("gpt3-2.7b", 32, 2560, 32, 2048, 50257));
    put(gpt("gpt3-6.7b", 32, 4096, 32, 2048, 50257));
    put(gpt("gpt3-13b", 40, 5120, 40, 2048, 50257));
    put(gpt("gpt3-175b", 96, 12288, 96, 2048, 50257));
    // GPT-2 (Radford et al. 2019): seq 1024, vocab 50257.
    put(gpt("gpt2-small", 12, 768, 12, 1024, 50257));
    put(gpt("gpt2-medium", 24, 1024, 16, 1024, 50257));
    put(gpt("gpt2-large", 36, 1280, 20, 1024, 50257));
    put(gpt("gpt2-xl", 48, 1600, 25, 1024, 50257));
    // Llama 2 (Touvron et al. 2023): seq 4096, vocab 32000; 70B uses 8 KV heads.
    put(llama("llama2-7b", 32, 4096, 32, 32, 11008, 4096, 32000));
    put(llama("llama2-13b", 40, 5120, 40, 40, 13824, 4096, 32000));
    put(llama("llama2-70b", 80, 8192, 64, 8, 28672, 4096, 32000));
    // Llama 3 (Dubey et al. 2024): seq 8192, vocab 128256, 8 KV heads, RoPE base 500000.
    put(llama("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256, 500000.0));
    put(llama("llama3-70b", 80, 8192, 64, 8, 28672, 8192, 128256, 500000.0));
    put(llama("llama3-405b", 126, 16384, 128, 8, 53248, 8192, 128256, 500000.0));
    // Mixtral (Jiang et al. 2024, and the released configs): Llama layers whose SwiGLU MLP is
    // 8 experts of width 14336 / 16384, top-2, 8 KV heads, 32k context.
    put(moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32768, 32000), 8, 2, 14336));
    put(moe(llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 65536, 32768), 8, 2, 16384));
    // DeepSeek-V3-style fine-grained MoE (DeepSeek-AI 2024): 61 layers, h 7168, the first 3
    // dense (SwiGLU 18432), then 256 routed experts of width 2048 (top-8) and 1 shared expert,
    // vocab 129280, 4k pre-training sequences. Approximated: multi-head latent attention is
    // counted as standard 128-head attention (h x 4h, about 9% more than MLA's low-rank
    // projections), and the multi-token-prediction module is left out.
    put(moe(llama("deepseek-v3-style", 61, 7168, 128, 128, 18432, 4096, 129280), 256, 8, 2048, 1, 3));
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : presets()) names.push_back(name);
  return names;
}

bool is_model_preset(const std::string& name) { return presets().count(name) > 0; }

ModelSpec model_preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) {
    Problems p;
    p.add("unknown model preset '" + name + "'",
          "use one of " + join_choices(model_preset_names()) +
              ", or describe the model with --layers --hidden --heads");
    p.throw_if_any();
  }
  return it->second;
}

double ModelSpec::attended_key_share() const {
  if (sliding_window <= 0 || seq_len <= sliding_window || layers <= 0) return 1.0;
  const double s = double(seq_len), w = double(sliding_window);
  // Query i sees min(i + 1, w) keys: w (w + 1) / 2 over the first w, then w each.
  const double windowed = (w * (w + 1) / 2 + (s - w) * w) / s / ((s + 1) / 2);
  int64_t windowed_layers = 0;
  for (int64_t l = 0; l < layers; ++l) windowed_layers += is_window_layer(l) ? 1 : 0;
  return (double(windowed_layers) * windowed + double(layers - windowed_layers)) / double(layers);
}

std::vector<std::string> ModelSpec::beyond_family() const {
  std::vector<std::string> out;
  const bool gpt = family == ModelFamily::GPT;
  if (head_size > 0 && !is_mla() && heads > 0 && head_size * heads != hidden)
    out.push_back(fmt::format("head_dim {} (hidden / heads = {})", head_size, hidden / heads));
  if (qk_norm) out.push_back("QK-norm");
  if (is_mla()) out.push_back("multi-head latent attention");
  if (sliding_window > 0) out.push_back(fmt::format("sliding-window attention ({} tokens)", sliding_window));
  if (attention_sinks) out.push_back("attention sinks");
  if (mtp_layers > 0) out.push_back(fmt::format("{} multi-token-prediction layer{}", mtp_layers, mtp_layers > 1 ? "s" : ""));
  if (!rope_scaling.type.empty()) out.push_back("rope scaling '" + rope_scaling.type + "'");
  if (rotary_percent != 1.0) out.push_back(fmt::format("rotary on {:g} of each head", rotary_percent));
  if (norm_eps != 1e-5) out.push_back(fmt::format("norm epsilon {:g}", norm_eps));
  if (has_qkv_bias() != gpt) out.push_back(has_qkv_bias() ? "Q/K/V biases" : "no Q/K/V biases");
  if (has_proj_bias() != gpt) out.push_back(has_proj_bias() ? "an output-projection bias" : "no output-projection bias");
  if (has_mlp_bias() != gpt) out.push_back(has_mlp_bias() ? "MLP biases" : "no MLP biases");
  if (has_layer_norm() != gpt) out.push_back(has_layer_norm() ? "LayerNorm" : "RMSNorm");
  if (is_gated_mlp() == gpt) out.push_back(is_gated_mlp() ? "a gated MLP" : "a two-matrix MLP");
  if (!activation.empty()) out.push_back("activation " + activation);
  if (activation_clamp > 0) out.push_back(fmt::format("gated unit clamped at {:g}", activation_clamp));
  if (is_moe()) {
    if (moe_layer_phase != 0) out.push_back(fmt::format("MoE layers at phase {} of {}", moe_layer_phase, moe_layer_freq));
    if (shared_experts > 0 && shared_expert_width() != expert_ffn_hidden)
      out.push_back(fmt::format("shared experts of width {} (routed {})", shared_expert_width(), expert_ffn_hidden));
    if (shared_expert_gate) out.push_back("a shared-expert gate");
    if (router_score != "softmax") out.push_back("router scoring " + router_score);
    if (router_bias) out.push_back("a router bias");
    if (router_expert_bias) out.push_back("a router expert-score bias");
    if (router_groups > 0) out.push_back(fmt::format("group-limited routing ({} groups, top {})", router_groups, router_group_topk));
    if (router_topk_scaling != 1.0) out.push_back(fmt::format("routed weights scaled by {:g}", router_topk_scaling));
  }
  return out;
}

void validate_model(const ModelSpec& m, Problems& p) {
  auto positive = [&](const char* flag, int64_t v) {
    if (v <= 0) p.add(std::string("--") + flag + " is " + std::to_string(v) + ", must be positive",
                      std::string("give --") + flag + " a value above 0");
  };
  positive("layers", m.layers);
  positive("hidden", m.hidden);
  positive("heads", m.heads);
  positive("kv-heads", m.kv_heads);
  positive("ffn-hidden", m.ffn_hidden);
  positive("seq-len", m.seq_len);
  positive("vocab", m.vocab);
  if (m.head_size < 0) p.add("--head-dim is " + std::to_string(m.head_size) + ", must be positive",
                             "give --head-dim a value above 0, or leave it out for hidden / heads");
  if (m.head_size == 0 && !m.is_mla() && m.hidden > 0 && m.heads > 0 && m.hidden % m.heads != 0)
    p.add("hidden (" + std::to_string(m.hidden) + ") is not divisible by heads (" +
              std::to_string(m.heads) + ")",
          "choose --heads that divides --hidden, e.g. " + std::to_string(m.hidden / 64 > 0 ? m.hidden / 64 : 1) +
              " heads of width 64 if 64 divides hidden");
  if (m.is_moe()) {
    if (m.experts_per_token <= 0 || m.experts_per_token > m.experts)
      p.add("experts per token (top-k) is " + std::to_string(m.experts_per_token) + " with " +
                std::to_string(m.experts) + " experts",
            "give --experts-per-token between 1 and --experts (Mixtral uses 2 of 8)");
    if (m.expert_ffn_hidden <= 0)
      p.add("expert MLP width is " + std::to_string(m.expert_ffn_hidden) + ", must be positive",
            "give --expert-ffn-hidden (Mixtral 8x7B: 14336)");
    if (m.shared_experts < 0) p.add("--shared-experts is negative", "give --shared-experts 0 or more");
    if (m.moe_dense_layers < 0 || m.moe_dense_layers >= m.layers)
      p.add("--moe-dense-layers " + std::to_string(m.moe_dense_layers) + " leaves no MoE layer of " +
                std::to_string(m.layers),
            "give --moe-dense-layers between 0 and layers - 1");
    if (m.moe_layer_freq < 1 || m.moe_layer_freq > m.layers)
      p.add("--moe-layer-freq " + std::to_string(m.moe_layer_freq) + " is not between 1 and the " +
                std::to_string(m.layers) + " layers",
            "give --moe-layer-freq 1 (every layer a MoE layer) or N (every N-th, as Megatron's --moe-layer-freq N)");
    if (!(m.capacity_factor >= 1.0))
      p.add("capacity factor " + std::to_string(m.capacity_factor) + " is below 1",
            "give --capacity-factor 1 (perfect balance) or more (1.25 is common)");
    if (!(m.moe_load_imbalance >= 1.0 && m.moe_load_imbalance <= double(m.experts)))
      p.add("--moe-load-imbalance " + fmt::format("{:g}", m.moe_load_imbalance) + " is not between 1 (balanced) and the " +
                std::to_string(m.experts) + " experts (every token on one rank's experts)",
            "give --moe-load-imbalance 1, or the most loaded ep rank's rows over the mean that `trident train` "
            "measures (its metrics file's ep_load_imbalance)");
  } else if (m.experts < 0) {
    p.add("--experts is " + std::to_string(m.experts) + ", must be 0 (dense) or more", "give --experts 0 or N");
  }
  if (m.is_mla() && (m.qk_nope_head_dim <= 0 || m.qk_rope_head_dim <= 0 || m.v_head_dim <= 0 || m.q_lora_rank < 0))
    p.add(fmt::format("multi-head latent attention (kv_lora_rank {}) needs positive qk_nope_head_dim ({}), "
                      "qk_rope_head_dim ({}) and v_head_dim ({}), and q_lora_rank ({}) of 0 or more",
                      m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.q_lora_rank),
          "give all four (DeepSeek-V3: 128, 64, 128, q_lora_rank 1536)", "mla-sizes");
  if (m.sliding_window < 0 || m.full_attention_every < 0)
    p.add(fmt::format("sliding window {} (full attention every {} layers) is negative", m.sliding_window,
                      m.full_attention_every),
          "give --window-size 0 (none) or the window in tokens, --window-attn-skip-freq 0 or N");
  else if (m.full_attention_every > 0 && m.sliding_window == 0)
    p.add(fmt::format("--window-attn-skip-freq {} without a sliding window: no layer has a window to skip",
                      m.full_attention_every),
          "give --window-size N too, or --window-attn-skip-freq 0");
  if (!(m.norm_eps > 0 && m.norm_eps < 1))
    p.add(fmt::format("--norm-epsilon {:g} is not between 0 and 1", m.norm_eps), "give --norm-epsilon 1e-5 or 1e-6");
  const RopeScaling& rs = m.rope_scaling;
  if (rs.type == "llama3" && !(rs.high_freq_factor > rs.low_freq_factor && rs.low_freq_factor > 0 && rs.factor > 0 &&
                               rs.original_max_position > 0))
    p.add(fmt::format("llama3 rope scaling (factor {:g}, low frequency factor {:g}, high frequency factor {:g}, original "
                      "context {}) needs positive values and a high frequency factor above the low one",
                      rs.factor, rs.low_freq_factor, rs.high_freq_factor, rs.original_max_position),
          "give --rope-high-freq-factor above --rope-low-freq-factor (Llama 3.1: factor 8, 1, 4, 8192)",
          "rope-scaling");
  // Hugging Face's attention factor takes mscale only when it and mscale_all_dim are both non-zero,
  // Megatron's always: the two agree only with mscale 1 alone, or both given.
  if (rs.type == "yarn" && (rs.mscale <= 0 || (rs.mscale != 1 && rs.mscale_all_dim == 0)))
    p.add(fmt::format("yarn's mscale {:g} with mscale_all_dim {:g}: Hugging Face's attention factor ignores an "
                      "mscale without mscale_all_dim (or of 0), Megatron's applies it", rs.mscale, rs.mscale_all_dim),
          "give --mscale-all-dim (mscale_all_dim) too, or --mscale 1", "rope-scaling");
  if (!(m.rope_theta > 0)) p.add(fmt::format("--rope-theta {:g} is not positive", m.rope_theta), "give --rope-theta 10000 or 500000");
  if (m.is_moe() && (m.moe_layer_phase < 0 || m.moe_layer_phase >= std::max<int64_t>(m.moe_layer_freq, 1)))
    p.add(fmt::format("MoE layer phase {} is not below --moe-layer-freq {}", m.moe_layer_phase, m.moe_layer_freq),
          "give a phase from 0 (the first layer of each group) to moe-layer-freq - 1");
  if (m.router_score != "softmax" && m.router_score != "sigmoid")
    p.add("router scoring '" + m.router_score + "' is unknown", "use softmax or sigmoid", "router-score");
  if (m.heads > 0 && m.kv_heads > 0 && m.heads % m.kv_heads != 0)
    p.add("heads (" + std::to_string(m.heads) + ") is not divisible by kv-heads (" +
              std::to_string(m.kv_heads) + ")",
          "grouped-query attention needs --kv-heads dividing --heads");
  // Sizes that each fit may multiply beyond 64 bits: say so here rather than print a wrapped count.
  try {
    count_parameters(m);
  } catch (const InputError& e) {
    for (const Problem& x : e.problems()) p.add(x.what, x.fix, x.code);
  }
}

}  // namespace trident
