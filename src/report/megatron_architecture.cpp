#include "report/megatron_architecture.h"

#include <fmt/format.h>

namespace trident {

void megatron_architecture_args(const ModelSpec& m, std::vector<std::string>& a, std::vector<std::string>& comments,
                                Problems& refuse) {
  auto cannot = [&](const std::string& what, const std::string& fix) {
    refuse.add(m.name + ": " + what, fix, "megatron-architecture");
  };
  // Megatron's default head width is hidden / heads: always written, so a model of its own
  // (Qwen3's 128 on 2048 / 32 = 64) is not silently another.
  if (!m.is_mla()) a.push_back(fmt::format("--kv-channels {}", m.head_dim()));
  if (m.qk_norm) a.push_back("--qk-layernorm");
  // Biases: Megatron has one switch for every linear layer, and one for Q, K and V besides.
  const bool qkv = m.has_qkv_bias(), proj = m.has_proj_bias(), mlp = m.has_mlp_bias();
  if (!proj && !mlp) {
    a.push_back("--disable-bias-linear");
    if (qkv) a.push_back("--add-qkv-bias");
  } else if (!(qkv && proj && mlp)) {
    cannot(fmt::format("biases on Q/K/V {}, the output projection {} and the MLP {}: Megatron biases all linear "
                       "layers or none (Q, K, V apart)",
                       qkv ? "yes" : "no", proj ? "yes" : "no", mlp ? "yes" : "no"),
           "describe the model with biases on all linear layers or on Q, K, V only");
  }
  if (m.activation == "relu2") a.push_back("--squared-relu");
  if (m.activation_clamp > 0) {
    // GPT-OSS: the gated unit clamped, its linear half offset by 1.
    a.push_back(fmt::format("--activation-func-clamp-value {}", m.activation_clamp));
    a.push_back("--glu-linear-offset 1.0");
  }
  if (m.has_layer_norm() && m.family == ModelFamily::Llama) a.push_back("--apply-layernorm-1p");  // Nemotron-4's LayerNorm1P
  if (m.rotary_percent != 1.0) a.push_back(fmt::format("--rotary-percent {}", m.rotary_percent));
  const RopeScaling& r = m.rope_scaling;
  if (r.type == "llama3") {
    // Megatron's Llama 3.1 scaling fixes the low/high frequency factors (1, 4) and the original context (8192).
    if (r.low_freq_factor != 1.0 || r.high_freq_factor != 4.0 || r.original_max_position != 8192)
      cannot(fmt::format("llama3 rope scaling with low/high frequency factors {:g}/{:g} and original context {}: "
                         "Megatron's --use-rope-scaling fixes 1/4 and 8192",
                         r.low_freq_factor, r.high_freq_factor, r.original_max_position),
             "use a config with Llama 3.1's values");
    a.push_back("--use-rope-scaling");
    a.push_back(fmt::format("--rope-scaling-factor {}", r.factor));
  } else if (r.type == "yarn") {
    if (m.is_mla()) a.push_back("--rope-type yarn");  // else the position embedding type (model_args)
    a.push_back(fmt::format("--rotary-scaling-factor {}", r.factor));
    a.push_back(fmt::format("--yarn-original-max-position-embeddings {}", r.original_max_position));
    a.push_back(fmt::format("--yarn-beta-fast {}", r.beta_fast));
    a.push_back(fmt::format("--yarn-beta-slow {}", r.beta_slow));
    a.push_back(fmt::format("--mscale {}", r.mscale));
    a.push_back(fmt::format("--mscale-all-dim {}", r.mscale_all_dim));
    if (!r.truncate) a.push_back("--no-yarn-correction-range-round-to-int");  // GPT-OSS's truncate false
  } else if (r.type == "linear") {
    if (r.factor != double(int64_t(r.factor)))
      cannot(fmt::format("linear rope scaling by {:g}: Megatron's interpolation factor is a whole number", r.factor),
             "use a whole factor");
    a.push_back(fmt::format("--rotary-seq-len-interpolation-factor {}", int64_t(r.factor)));
  }
  if (m.is_mla()) {
    a.push_back("--multi-latent-attention");
    if (m.q_lora_rank > 0) a.push_back(fmt::format("--q-lora-rank {}", m.q_lora_rank));
    a.push_back(fmt::format("--kv-lora-rank {}", m.kv_lora_rank));
    a.push_back(fmt::format("--qk-head-dim {}", m.qk_nope_head_dim));
    a.push_back(fmt::format("--qk-pos-emb-head-dim {}", m.qk_rope_head_dim));
    a.push_back(fmt::format("--v-head-dim {}", m.v_head_dim));
  }
  if (m.sliding_window > 0) {
    a.push_back(fmt::format("--window-size ({},0)", m.sliding_window));
    if (m.full_attention_every > 0) a.push_back(fmt::format("--window-attn-skip-freq {}", m.full_attention_every));
  }
  if (m.attention_sinks) a.push_back("--softmax-type learnable");
  if (m.mtp_layers > 0) a.push_back(fmt::format("--mtp-num-layers {}", m.mtp_layers));
  if (!m.is_moe()) return;
  if (m.shared_expert_gate) a.push_back("--moe-shared-expert-gate");
  if (m.router_score != "softmax") a.push_back("--moe-router-score-function " + m.router_score);
  // Softmax over all experts before the top-k (DeepSeek-V2's unnormalised weights); Megatron's
  // default takes the softmax over the top-k scores (normalised: Mixtral, Qwen).
  if (m.router_score == "softmax" && !m.router_norm_topk) a.push_back("--moe-router-pre-softmax");
  if (m.router_expert_bias) a.push_back("--moe-router-enable-expert-bias");
  if (m.router_groups > 0) {
    a.push_back(fmt::format("--moe-router-num-groups {}", m.router_groups));
    a.push_back(fmt::format("--moe-router-group-topk {}", m.router_group_topk));
  }
  if (m.router_topk_scaling != 1.0) a.push_back(fmt::format("--moe-router-topk-scaling-factor {}", m.router_topk_scaling));
  if (m.router_bias)
    comments.push_back("the router's bias (" + std::to_string(m.experts) +
                       " parameters per MoE layer, GPT-OSS) has no Megatron-LM argument: Megatron-Bridge's GPT-OSS "
                       "provider sets it");
}

}  // namespace trident
