// DeepSeek-V3's Hugging Face names (DeepseekV3ForCausalLM, modeling_deepseek.py, and the released
// checkpoint's MTP layers), see hf_names.h. nn.Linear keeps [out, in] as Trident does; nothing is
// transposed or permuted: Trident rotates a rope head's pairs (2i, 2i+1), and modeling_deepseek
// de-interleaves q_pe / k_pe (view d/2, 2 -> transpose) before its rotate_half, which rotates the
// same pairs with the same frequencies, on the weights as stored.
//   wte                          -> model.embed_tokens.weight
//   layers.i.ln1_w / ln2_w       -> model.layers.i.input_layernorm / post_attention_layernorm.weight
//   layers.i.q_a_w, q_a_norm_w, q_b_w -> ...self_attn.q_a_proj, q_a_layernorm, q_b_proj.weight
//   layers.i.q_w (q_lora_rank 0) -> ...self_attn.q_proj.weight
//   layers.i.kv_a_w, kv_a_norm_w, kv_b_w -> ...self_attn.kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj.weight
//   layers.i.attn_proj_w         -> ...self_attn.o_proj.weight
//   dense layer (i < first_k_dense_replace): gate_up_w, fc_proj_w -> mlp.gate_proj / up_proj / down_proj
//   MoE layer: router_w -> mlp.gate.weight; the meta's expert bias row -> mlp.gate.e_score_correction_bias;
//     experts -> mlp.experts.j.{gate,up,down}_proj; shared.gate_up_w / fc_proj_w ->
//     mlp.shared_experts.{gate,up,down}_proj (one MLP of n_shared_experts x moe_intermediate_size)
//   lnf_w, head_w                -> model.norm.weight, lm_head.weight
// MTP depth j at model.layers.{L + j} (L = num_hidden_layers): enorm_w / hnorm_w -> enorm / hnorm,
// eh_proj_w [C, 2C] -> eh_proj (columns: the normed embedding's half first, then the hidden
// state's, as DeepSeek's and Megatron-Core's concatenation), mtp_norm_w -> shared_head.norm, and
// embed_tokens / shared_head.head: copies of model.embed_tokens / lm_head (the model shares them),
// then the layer's usual names.
#include <fmt/format.h>

#include "runtime/checkpoint/hf_names.h"
#include "runtime/checkpoint/hf_pieces.h"

namespace trident::checkpoint {

using Op = HfPiece::Op;

std::vector<HfPiece> deepseek_v3_pieces(const ModelSpec& m) {
  std::vector<HfPiece> out;
  Pieces t{out};
  const int64_t C = m.hidden, F = m.ffn_hidden, V = m.vocab, H = m.heads;
  const int64_t qd = m.qk_nope_head_dim + m.qk_rope_head_dim, Fs = m.shared_experts * m.expert_ffn_hidden;
  t.whole("wte", "model.embed_tokens.weight", {V, C});
  int64_t moe_row = 0;  // the meta's expert-bias rows: MoE layers in order, the MTP layers' last
  for (int64_t l = 0; l < m.layers + m.mtp_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("model.layers.{}.", l);
    const bool moe = m.is_moe_layer(l < m.layers ? l : m.layers - 1);  // an MTP layer: the last layer's kind
    if (l >= m.layers) {
      t.whole("wte", h + "embed_tokens.weight", {V, C}, Op::Tied);
      t.whole(p + "enorm_w", h + "enorm.weight", {C});
      t.whole(p + "hnorm_w", h + "hnorm.weight", {C});
      t.whole(p + "eh_proj_w", h + "eh_proj.weight", {C, 2 * C});
      t.whole(p + "mtp_norm_w", h + "shared_head.norm.weight", {C});
      t.whole("head_w", h + "shared_head.head.weight", {V, C}, Op::Tied);
    }
    t.whole(p + "ln1_w", h + "input_layernorm.weight", {C});
    if (m.q_lora_rank > 0) {
      t.whole(p + "q_a_w", h + "self_attn.q_a_proj.weight", {m.q_lora_rank, C});
      t.whole(p + "q_a_norm_w", h + "self_attn.q_a_layernorm.weight", {m.q_lora_rank});
      t.whole(p + "q_b_w", h + "self_attn.q_b_proj.weight", {H * qd, m.q_lora_rank});
    } else {
      t.whole(p + "q_w", h + "self_attn.q_proj.weight", {H * qd, C});
    }
    t.whole(p + "kv_a_w", h + "self_attn.kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.qk_rope_head_dim, C});
    t.whole(p + "kv_a_norm_w", h + "self_attn.kv_a_layernorm.weight", {m.kv_lora_rank});
    t.whole(p + "kv_b_w", h + "self_attn.kv_b_proj.weight", {H * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank});
    t.whole(p + "attn_proj_w", h + "self_attn.o_proj.weight", {C, H * m.v_head_dim});
    t.whole(p + "ln2_w", h + "post_attention_layernorm.weight", {C});
    if (!moe) {
      t.rows(p + "gate_up_w", 0, h + "mlp.gate_proj.weight", {F, C});
      t.rows(p + "gate_up_w", F, h + "mlp.up_proj.weight", {F, C});
      t.whole(p + "fc_proj_w", h + "mlp.down_proj.weight", {C, F});
      continue;
    }
    routed_experts(m, l, HfClass::DeepseekV3, t);
    if (m.router_expert_bias) t.rows("", moe_row, h + "mlp.gate.e_score_correction_bias", {m.experts}, Op::ExpertBias);
    ++moe_row;
    if (Fs > 0) {
      t.rows(p + "shared.gate_up_w", 0, h + "mlp.shared_experts.gate_proj.weight", {Fs, C});
      t.rows(p + "shared.gate_up_w", Fs, h + "mlp.shared_experts.up_proj.weight", {Fs, C});
      t.whole(p + "shared.fc_proj_w", h + "mlp.shared_experts.down_proj.weight", {C, Fs});
    }
  }
  t.whole("lnf_w", "model.norm.weight", {C});
  t.whole("head_w", "lm_head.weight", {V, C});
  return out;
}

nlohmann::json deepseek_v3_config(const ModelSpec& m, const nn::MoeOptions& router) {
  auto or_null = [](int64_t v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"architectures", {"DeepseekV3ForCausalLM"}},
          {"model_type", "deepseek_v3"},
          {"vocab_size", m.vocab},
          {"hidden_size", m.hidden},
          {"intermediate_size", m.ffn_hidden},
          {"moe_intermediate_size", m.expert_ffn_hidden},
          {"num_hidden_layers", m.layers},
          {"num_nextn_predict_layers", m.mtp_layers},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.heads},
          {"n_shared_experts", or_null(m.shared_experts)},
          {"n_routed_experts", m.experts},
          {"routed_scaling_factor", m.router_topk_scaling},
          {"kv_lora_rank", m.kv_lora_rank},
          {"q_lora_rank", or_null(m.q_lora_rank)},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          // noaux_tc chooses on score + e_score_correction_bias; greedy (no bias) has no groups
          // (check_deepseek_v3_exportable refuses the rest).
          {"topk_method", m.router_expert_bias ? "noaux_tc" : "greedy"},
          {"n_group", m.router_groups > 0 ? m.router_groups : 1},
          {"topk_group", m.router_groups > 0 ? m.router_group_topk : 1},
          {"num_experts_per_tok", m.experts_per_token},
          {"moe_layer_freq", 1},
          {"first_k_dense_replace", m.moe_dense_layers},
          {"norm_topk_prob", router.normalise},
          {"scoring_func", "sigmoid"},
          {"hidden_act", "silu"},
          {"max_position_embeddings", m.seq_len},
          {"rms_norm_eps", m.norm_epsilon()},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", hf_rope_scaling(m.rope_scaling)},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"tie_word_embeddings", false},
          {"torch_dtype", "float32"}};
}

void check_deepseek_v3_exportable(const ModelSpec& m, Problems& p) {
  const char* const keep = "keep the checkpoint for `trident train --init-from` / `generate`";
  auto refuse = [&](const std::string& what, const std::string& fix) {
    p.add("the checkpoint holds multi-head latent attention (Hugging Face's DeepseekV3ForCausalLM) with " + what, fix,
          "export-architecture");
  };
  if (!m.is_moe())
    refuse("dense layers only: DeepseekV3ForCausalLM's layers from first_k_dense_replace on are MoE layers",
           fmt::format("{}; export a DeepSeek-V3 model with --num-experts", keep));
  else if (m.moe_layer_freq != 1 || m.moe_layer_phase != 0)
    refuse(fmt::format("MoE layers every {} layers: DeepseekV3ForCausalLM's are every layer after the dense ones "
                       "(moe_layer_freq 1)", m.moe_layer_freq),
           fmt::format("{}; export a model with --moe-layer-freq 1", keep));
  if (m.is_moe() && m.router_score != "sigmoid")
    refuse(fmt::format("{} router scores: DeepseekV3ForCausalLM's gate scores by sigmoid (scoring_func)", m.router_score),
           fmt::format("{}; export a model trained with --moe-router-score-function sigmoid", keep));
  if (m.is_moe() && m.router_groups > 0 && !m.router_expert_bias)
    refuse(fmt::format("{} router groups without an expert bias: DeepseekV3ForCausalLM limits groups only in "
                       "noaux_tc, which chooses on score + e_score_correction_bias", m.router_groups),
           fmt::format("{}; export a model trained with --moe-router-enable-expert-bias", keep));
  // Hugging Face's noaux_tc scores a group by its top 2 choice scores; the runtime's by its top
  // k / topk_group (Megatron-Core's group_limited_topk): the same choice only where k = 2 x topk_group.
  if (m.is_moe() && m.router_groups > 0 && m.router_expert_bias && m.experts_per_token != 2 * m.router_group_topk)
    refuse(fmt::format("{} experts per token in the best {} of {} groups: DeepseekV3ForCausalLM (noaux_tc) ranks a "
                       "group by its top 2 scores, the runtime (as Megatron-Core) by its top num_experts_per_tok / "
                       "topk_group = {}, so they choose other experts",
                       m.experts_per_token, m.router_group_topk, m.router_groups,
                       double(m.experts_per_token) / double(std::max<int64_t>(m.router_group_topk, 1))),
           fmt::format("{}; export a model whose num_experts_per_tok is 2 x topk_group (DeepSeek-V3: 8 = 2 x 4)", keep));
  // DeepseekV3Attention's q_a_layernorm / kv_a_layernorm keep RMSNorm's default epsilon 1e-6
  // whatever rms_norm_eps says; the runtime's latent norms use the model's.
  if (m.norm_epsilon() != 1e-6)
    refuse(fmt::format("norm epsilon {:g} (rms_norm_eps): DeepseekV3ForCausalLM's latent norms (q_a_layernorm, "
                       "kv_a_layernorm) use 1e-6 whatever it says, the runtime's use the model's", m.norm_epsilon()),
           fmt::format("{}; export a model with --norm-epsilon 1e-6", keep));
  // DeepSeek-V3's rotary embedding is plain or YaRN (DeepseekV3YarnRotaryEmbedding).
  if (!m.rope_scaling.type.empty() && m.rope_scaling.type != "yarn")
    refuse(fmt::format("rope scaling '{}' (rope_scaling): DeepseekV3ForCausalLM's rotary embedding is plain or "
                       "yarn, not Llama 3.1's", m.rope_scaling.type),
           fmt::format("{}; export a model without --rope-scaling-factor", keep));
  if (m.shared_expert_gate)
    refuse("a gated shared expert (Qwen2-MoE's): DeepseekV3ForCausalLM adds its shared experts ungated",
           fmt::format("{}; export a model without the shared expert gate", keep));
}

}  // namespace trident::checkpoint
