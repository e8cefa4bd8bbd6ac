// Hugging Face names for a checkpoint's logical tensors (see hf_names.h).
//
// GPT -> GPT-2 names (HF's Conv1D keeps weights as [in, out], so the matrices are transposed):
//   wte [V, C]                 -> transformer.wte.weight [V, C] (also the tied lm_head)
//   wpe [T, C]                 -> transformer.wpe.weight
//   layers.i.ln1_w / ln1_b     -> transformer.h.i.ln_1.weight / bias
//   layers.i.qkv_w [3C, C]     -> transformer.h.i.attn.c_attn.weight [C, 3C] (q, k, v blocks)
//   layers.i.qkv_b             -> transformer.h.i.attn.c_attn.bias
//   layers.i.attn_proj_w [C,C] -> transformer.h.i.attn.c_proj.weight (transposed), bias
//   layers.i.ln2_w / ln2_b     -> transformer.h.i.ln_2.weight / bias
//   layers.i.fc_w [F, C]       -> transformer.h.i.mlp.c_fc.weight [C, F], bias
//   layers.i.fc_proj_w [C, F]  -> transformer.h.i.mlp.c_proj.weight [F, C], bias
//   lnf_w / lnf_b              -> transformer.ln_f.weight / bias
//
// Llama -> Llama names (nn.Linear keeps [out, in], as Trident does: nothing is transposed):
//   wte [V, C]                     -> model.embed_tokens.weight
//   layers.i.ln1_w                 -> model.layers.i.input_layernorm.weight
//   layers.i.q_w [C, C]            -> model.layers.i.self_attn.q_proj.weight (rows permuted, below)
//   layers.i.kv_w [2 kv hd, C]     -> ...k_proj.weight (first kv hd rows, permuted) and v_proj.weight
//   layers.i.attn_proj_w [C, C]    -> ...self_attn.o_proj.weight
//   layers.i.ln2_w                 -> model.layers.i.post_attention_layernorm.weight
//   layers.i.gate_up_w [2F, C]     -> ...mlp.gate_proj.weight (first F rows) and up_proj.weight
//   layers.i.fc_proj_w [C, F]      -> ...mlp.down_proj.weight
//   lnf_w, head_w [V, C]           -> model.norm.weight, lm_head.weight
// Trident rotates the pairs (2i, 2i+1) of a head (Meta's layout); Hugging Face's Llama rotates
// (i, i + hd/2). Within each head of q and k, row 2i goes to row i and row 2i+1 to i + hd/2 (the
// permutation of HF's own conversion script), so both compute the same attention.
//
// A Llama-family mixture of experts -> Mixtral names: attention, norms, embeddings and head as
// Llama; each layer's MLP is a router and E SwiGLU experts of width F (expert_ffn_hidden):
//   layers.i.router_w [E, C]                -> model.layers.i.block_sparse_moe.gate.weight
//   layers.i.experts.gate_up_w [E 2F, C]    -> ...block_sparse_moe.experts.j.w1.weight (rows 2F j ..
//                                              2F j + F: the gate) and w3.weight (the next F: up)
//   layers.i.experts.fc_proj_w [E C, F]     -> ...block_sparse_moe.experts.j.w2.weight (rows C j ..)
// Mixtral's router is Trident's softmax router with the chosen weights normalised; it never
// drops a token, so dropping, the capacity factor and the z-loss only shaped training.
//
// A Llama-family mixture of experts Mixtral cannot hold (shared experts, dense layers, MoE every
// N-th layer, unnormalised weights) -> Qwen2-MoE names (Qwen2MoeForCausalLM): attention as Llama
// plus q/k/v biases, written as zeros; a dense layer's MLP as Llama's under model.layers.i.mlp.;
// a MoE layer's under model.layers.i.mlp.:
//   layers.i.router_w                   -> gate.weight
//   layers.i.experts.gate_up_w / fc_proj_w -> experts.j.gate_proj / up_proj / down_proj.weight
//   layers.i.shared.gate_up_w [2Fs, C]  -> shared_expert.gate_proj.weight (first Fs rows), up_proj
//   layers.i.shared.fc_proj_w [C, Fs]   -> shared_expert.down_proj.weight, times 2
//   (none)                              -> shared_expert_gate.weight [1, C], zeros
// Qwen2-MoE scales its one shared expert by sigmoid(shared_expert_gate x); a zero gate gives 1/2
// for every token and the doubled down projection makes it 1: both scalings are powers of two,
// so the product is Trident's unscaled shared experts to the bit. Trident's shared experts are
// one MLP of Fs = shared_experts x expert_ffn_hidden columns, Qwen2-MoE's one shared expert of
// shared_expert_intermediate_size = Fs (zero without shared experts: empty tensors). Dense layers
// are listed in mlp_only_layers (decoder_sparse_step 1); norm_topk_prob is --moe-normalise.
//
// A Llama-family model with QK-norm -> Qwen3's names (Qwen3ForCausalLM; a mixture of experts
// Qwen3MoeForCausalLM): Llama's, with q/k/v/o of heads x head_dim rows or columns and
//   layers.i.q_norm_w [hd]              -> model.layers.i.self_attn.q_norm.weight (permuted as a head of q)
//   layers.i.k_norm_w [hd]              -> model.layers.i.self_attn.k_norm.weight (permuted as a head of k)
// and a MoE layer's router and experts as Qwen2-MoE's (mlp.gate, mlp.experts.j.gate_proj / up_proj /
// down_proj), no shared expert, no biases; dense layers in mlp_only_layers (decoder_sparse_step 1).
#include "runtime/checkpoint/hf_names.h"

#include "runtime/checkpoint/hf_pieces.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "runtime/engine/run_meta.h"

namespace trident::checkpoint {
namespace {

using Op = HfPiece::Op;

std::vector<HfPiece> gpt2_pieces(const ModelSpec& m) {
  std::vector<HfPiece> out;
  Pieces t{out};
  const int64_t C = m.hidden, F = m.ffn_hidden;
  t.whole("wte", "transformer.wte.weight", {m.vocab, C});
  t.whole("wpe", "transformer.wpe.weight", {m.seq_len, C});
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("transformer.h.{}.", l);
    t.whole(p + "ln1_w", h + "ln_1.weight", {C});
    t.whole(p + "ln1_b", h + "ln_1.bias", {C});
    t.whole(p + "qkv_w", h + "attn.c_attn.weight", {C, 3 * C}, Op::Transpose);
    t.whole(p + "qkv_b", h + "attn.c_attn.bias", {3 * C});
    t.whole(p + "attn_proj_w", h + "attn.c_proj.weight", {C, C}, Op::Transpose);
    t.whole(p + "attn_proj_b", h + "attn.c_proj.bias", {C});
    t.whole(p + "ln2_w", h + "ln_2.weight", {C});
    t.whole(p + "ln2_b", h + "ln_2.bias", {C});
    t.whole(p + "fc_w", h + "mlp.c_fc.weight", {C, F}, Op::Transpose);
    t.whole(p + "fc_b", h + "mlp.c_fc.bias", {F});
    t.whole(p + "fc_proj_w", h + "mlp.c_proj.weight", {F, C}, Op::Transpose);
    t.whole(p + "fc_proj_b", h + "mlp.c_proj.bias", {C});
  }
  t.whole("lnf_w", "transformer.ln_f.weight", {C});
  t.whole("lnf_b", "transformer.ln_f.bias", {C});
  return out;
}

// Layer l's shared experts as Qwen2-MoE's one gated shared expert (see the top): the gate's zero
// weights give every token 1/2, the doubled down projection brings it back to 1.
void qwen2_moe_shared_expert(const ModelSpec& m, int64_t l, Pieces& t) {
  const int64_t C = m.hidden, Fs = m.shared_experts * m.expert_ffn_hidden;
  const std::string p = fmt::format("layers.{}.shared.", l), h = fmt::format("model.layers.{}.mlp.shared_expert", l);
  if (Fs == 0) {  // the class always builds a shared expert: an empty one adds nothing
    t.zeros(h + ".gate_proj.weight", {0, C});
    t.zeros(h + ".up_proj.weight", {0, C});
    t.zeros(h + ".down_proj.weight", {C, 0});
  } else {
    t.rows(p + "gate_up_w", 0, h + ".gate_proj.weight", {Fs, C});
    t.rows(p + "gate_up_w", Fs, h + ".up_proj.weight", {Fs, C});
    t.whole(p + "fc_proj_w", h + ".down_proj.weight", {C, Fs}, Op::Doubled);
  }
  t.zeros(h + "_gate.weight", {1, C});
}

// Llama's tensors; a mixture of experts' MoE layers under cls's names, and under Qwen2-MoE's the
// zero q/k/v biases and the dense layers' MLPs under mlp. as Llama's.
std::vector<HfPiece> llama_pieces(const ModelSpec& m, HfClass cls) {
  const int64_t hd = m.head_dim(), kv = m.kv_dim(), F = m.ffn_hidden, C = m.hidden;
  const bool qwen2 = m.is_moe() && cls == HfClass::Qwen2Moe;
  const bool qwen3 = cls == HfClass::Qwen3 || cls == HfClass::Qwen3Moe;
  std::vector<HfPiece> out;
  Pieces t{out};
  t.whole("wte", "model.embed_tokens.weight", {m.vocab, C});
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("model.layers.{}.", l);
    t.whole(p + "ln1_w", h + "input_layernorm.weight", {C});
    t.rows(p + "q_w", 0, h + "self_attn.q_proj.weight", {m.q_dim(), C}, Op::HalfRotary, hd);
    t.rows(p + "kv_w", 0, h + "self_attn.k_proj.weight", {kv, C}, Op::HalfRotary, hd);
    t.rows(p + "kv_w", kv, h + "self_attn.v_proj.weight", {kv, C});
    if (qwen3) {  // each head's rotary pairs in Hugging Face's order, as the rows of q and k
      t.rows(p + "q_norm_w", 0, h + "self_attn.q_norm.weight", {hd}, Op::HalfRotary, hd);
      t.rows(p + "k_norm_w", 0, h + "self_attn.k_norm.weight", {hd}, Op::HalfRotary, hd);
    }
    if (m.attention_sinks) t.whole(p + "sinks", h + "self_attn.sinks", {m.heads});  // GPT-OSS's name
    if (qwen2)
      for (const auto& [bias, rows] : {std::pair{"q_proj", m.hidden}, {"k_proj", kv}, {"v_proj", kv}})
        t.zeros(h + "self_attn." + bias + ".bias", {rows});
    t.whole(p + "attn_proj_w", h + "self_attn.o_proj.weight", {C, m.v_dim()});
    t.whole(p + "ln2_w", h + "post_attention_layernorm.weight", {C});
    if (m.is_moe_layer(l)) {
      routed_experts(m, l, cls, t);
      if (qwen2) qwen2_moe_shared_expert(m, l, t);
      continue;
    }
    t.rows(p + "gate_up_w", 0, h + "mlp.gate_proj.weight", {F, C});
    t.rows(p + "gate_up_w", F, h + "mlp.up_proj.weight", {F, C});
    t.whole(p + "fc_proj_w", h + "mlp.down_proj.weight", {C, F});
  }
  t.whole("lnf_w", "model.norm.weight", {C});
  t.whole("head_w", "lm_head.weight", {m.vocab, C});
  return out;
}

nlohmann::json llama_config(const ModelSpec& m) {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", m.vocab},
          {"hidden_size", m.hidden},
          {"intermediate_size", m.ffn_hidden},
          {"num_hidden_layers", m.layers},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.kv_heads},
          {"head_dim", m.head_dim()},
          {"max_position_embeddings", m.seq_len},
          {"hidden_act", "silu"},
          {"rms_norm_eps", m.norm_epsilon()},  // the runtime's RMSNorm epsilon
          {"rope_theta", m.rope_theta},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"torch_dtype", "float32"}};
  if (!m.rope_scaling.type.empty()) c["rope_scaling"] = hf_rope_scaling(m.rope_scaling);
  return c;
}

// Llama's attention and norms, Mixtral's experts. Hugging Face's load-balancing loss (Mixtral's
// and Qwen2-MoE's) is
// E x sum_e P_e f_e with f_e the expert's share of the N x k assignments' tokens, summed over
// the k choices: k times Trident's (Megatron's) E / k x sum_e P_e f_e for the same coefficient,
// hence router_aux_loss_coef = Trident's coefficient / k.
nlohmann::json mixtral_config(const ModelSpec& m, const nn::MoeOptions& router) {
  nlohmann::json c = llama_config(m);
  for (const char* key : {"attention_bias", "mlp_bias"}) c.erase(key);
  c.update({{"architectures", {"MixtralForCausalLM"}},
            {"model_type", "mixtral"},
            {"intermediate_size", m.expert_ffn_hidden},
            {"num_local_experts", m.experts},
            {"num_experts_per_tok", m.experts_per_token},
            {"router_aux_loss_coef", router.aux_coeff / double(m.experts_per_token)},
            {"router_jitter_noise", 0.0},
            {"output_router_logits", false},
            {"sliding_window", nullptr},
            {"attention_dropout", 0.0}});
  return c;
}

// Llama's attention (with the zero q/k/v biases Qwen2 always has), Qwen2-MoE's MLPs; its
// load-balancing loss is Mixtral's, so its coefficient too.
nlohmann::json qwen2_moe_config(const ModelSpec& m, const nn::MoeOptions& router) {
  nlohmann::json c = llama_config(m);
  for (const char* key : {"attention_bias", "mlp_bias", "head_dim"}) c.erase(key);  // head_dim = hidden / heads
  nlohmann::json dense = nlohmann::json::array();
  for (int64_t l = 0; l < m.layers; ++l)
    if (!m.is_moe_layer(l)) dense.push_back(l);
  c.update({{"architectures", {"Qwen2MoeForCausalLM"}},
            {"model_type", "qwen2_moe"},
            {"intermediate_size", m.ffn_hidden},
            {"moe_intermediate_size", m.expert_ffn_hidden},
            {"shared_expert_intermediate_size", m.shared_experts * m.expert_ffn_hidden},
            {"num_experts", m.experts},
            {"num_experts_per_tok", m.experts_per_token},
            {"norm_topk_prob", router.normalise},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", dense},
            {"router_aux_loss_coef", router.aux_coeff / double(m.experts_per_token)},
            {"output_router_logits", false},
            {"use_sliding_window", false},
            {"sliding_window", nullptr},
            {"max_window_layers", m.layers},
            {"attention_dropout", 0.0}});
  return c;
}

// Llama's attention with QK-norm and heads of head_dim; a mixture of experts' MLPs as Qwen2-MoE's
// without the shared expert (its load-balancing loss is Mixtral's, so its coefficient too).
nlohmann::json qwen3_config(const ModelSpec& m, const nn::MoeOptions& router) {
  nlohmann::json c = llama_config(m);
  c.erase("mlp_bias");
  c.update({{"architectures", {m.is_moe() ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"}},
            {"model_type", m.is_moe() ? "qwen3_moe" : "qwen3"},
            {"use_sliding_window", false},
            {"sliding_window", nullptr},
            {"max_window_layers", m.layers},
            {"attention_dropout", 0.0}});
  if (!m.is_moe()) return c;
  nlohmann::json dense = nlohmann::json::array();
  for (int64_t l = 0; l < m.layers; ++l)
    if (!m.is_moe_layer(l)) dense.push_back(l);
  c.update({{"moe_intermediate_size", m.expert_ffn_hidden},
            {"num_experts", m.experts},
            {"num_experts_per_tok", m.experts_per_token},
            {"norm_topk_prob", router.normalise},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", dense},
            {"router_aux_loss_coef", router.aux_coeff / double(m.experts_per_token)},
            {"output_router_logits", false}});
  return c;
}

nlohmann::json gpt2_config(const ModelSpec& m) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", m.vocab},
          {"n_positions", m.seq_len},
          {"n_ctx", m.seq_len},
          {"n_embd", m.hidden},
          {"n_layer", m.layers},
          {"n_head", m.heads},
          {"n_inner", m.ffn_hidden},
          {"activation_function", "gelu_new"},  // tanh approximation, as Trident's kernels
          {"layer_norm_epsilon", m.norm_epsilon()},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

}  // namespace

// Layer l's router and experts under Mixtral's (w1 gate, w2 down, w3 up, under block_sparse_moe.)
// or Qwen2-MoE's names (gate_proj, down_proj, up_proj, under mlp.), see the top.
void routed_experts(const ModelSpec& m, int64_t l, HfClass cls, Pieces& t) {
  const int64_t F = m.expert_ffn_hidden, C = m.hidden;
  const bool mixtral = cls == HfClass::Mixtral;
  const std::string p = fmt::format("layers.{}.", l),
                    h = fmt::format("model.layers.{}.{}", l, mixtral ? "block_sparse_moe." : "mlp.");
  const char* gate = mixtral ? "w1" : "gate_proj";
  const char* down = mixtral ? "w2" : "down_proj";
  const char* up = mixtral ? "w3" : "up_proj";
  t.whole(p + "router_w", h + "gate.weight", {m.experts, C});
  for (int64_t j = 0; j < m.experts; ++j) {
    const std::string e = fmt::format("{}experts.{}.", h, j);
    t.rows(p + "experts.gate_up_w", j * 2 * F, e + gate + ".weight", {F, C});
    t.rows(p + "experts.fc_proj_w", j * C, e + down + ".weight", {C, F});
    t.rows(p + "experts.gate_up_w", j * 2 * F + F, e + up + ".weight", {F, C});
  }
}

HfClass hf_class(const ModelSpec& m, const nn::MoeOptions& router) {
  if (m.family == ModelFamily::GPT) return HfClass::Gpt2;
  if (m.is_mla()) return HfClass::DeepseekV3;
  if (m.qk_norm) return m.is_moe() ? HfClass::Qwen3Moe : HfClass::Qwen3;
  if (!m.is_moe()) return HfClass::Llama;
  const bool every_layer = m.moe_dense_layers == 0 && m.moe_layer_freq == 1;
  return every_layer && m.shared_experts == 0 && router.normalise ? HfClass::Mixtral : HfClass::Qwen2Moe;
}

const char* hf_class_names(HfClass cls) {
  switch (cls) {
    case HfClass::Gpt2: return "GPT-2";
    case HfClass::Llama: return "Hugging Face Llama";
    case HfClass::Mixtral: return "Hugging Face Mixtral";
    case HfClass::Qwen2Moe: return "Hugging Face Qwen2-MoE";
    case HfClass::Qwen3: return "Hugging Face Qwen3";
    case HfClass::Qwen3Moe: return "Hugging Face Qwen3-MoE";
    case HfClass::DeepseekV3: return "Hugging Face DeepSeek-V3";
  }
  return "";
}

std::vector<HfPiece> hf_pieces(const ModelSpec& m, HfClass cls) {
  if (cls == HfClass::DeepseekV3) return deepseek_v3_pieces(m);
  return cls == HfClass::Gpt2 ? gpt2_pieces(m) : llama_pieces(m, cls);
}

nlohmann::json hf_config(const ModelSpec& m, HfClass cls, const nn::MoeOptions& router) {
  switch (cls) {
    case HfClass::Gpt2: return gpt2_config(m);
    case HfClass::Llama: return llama_config(m);
    case HfClass::Mixtral: return mixtral_config(m, router);
    case HfClass::Qwen2Moe: return qwen2_moe_config(m, router);
    case HfClass::Qwen3:
    case HfClass::Qwen3Moe: return qwen3_config(m, router);
    case HfClass::DeepseekV3: return deepseek_v3_config(m, router);
  }
  return {};
}

void check_hf_exportable(const ModelSpec& m, Problems& p) {
  const bool llama = m.family == ModelFamily::Llama;
  if (llama && m.tied_embeddings())
    p.add("the checkpoint holds a Llama model with a tied head, which Hugging Face's Llama does not load",
          "export a Llama checkpoint with its own head (the runtime's default)", "export-family");
  if (m.is_moe() && !llama)
    p.add(fmt::format("the checkpoint holds a GPT-family mixture of experts ({} GELU experts per layer), which no "
                      "Hugging Face class loads (MixtralForCausalLM and Qwen2MoeForCausalLM are Llama-shaped: SwiGLU "
                      "experts, RMSNorm, RoPE)",
                      m.experts),
          "train the mixture of experts with --family llama to export it as Mixtral or Qwen2-MoE", "export-moe");
  if (llama && m.qk_norm && m.shared_experts > 0)
    p.add(fmt::format("the checkpoint holds a mixture of experts with QK-norm and {} shared experts: "
                      "Qwen3MoeForCausalLM (the class with QK-norm) has no shared expert",
                      m.shared_experts),
          "train a QK-norm mixture of experts without --shared-experts to export it as Qwen3-MoE", "export-moe");
  // GptOssForCausalLM is the class with both, but its layer also has attention biases and clamped
  // SwiGLU experts with biases (alpha 1.702, the linear half offset by 1), which the Llama layer has not.
  if (llama && (m.sliding_window > 0 || m.attention_sinks))
    p.add(fmt::format("the checkpoint holds the Llama layer with {}: no Hugging Face class the export writes has "
                      "it (GPT-OSS's also has attention biases and clamped SwiGLU experts with biases)",
                      m.sliding_window > 0 && m.attention_sinks ? "sliding windows and attention sinks"
                      : m.sliding_window > 0                    ? "sliding windows"
                                                                : "attention sinks"),
          "keep the checkpoint for `trident train --init-from` / `generate`; export a model without "
          "--window-size / --attention-sinks", "export-architecture");
  // The Llama layer's biases and GPT-OSS's clamped unit: no class the export writes holds them
  // (Qwen2-MoE's q/k/v biases are written as zeros), so neither export nor import may drop them.
  const bool biases = m.has_qkv_bias() || m.has_proj_bias() || m.has_mlp_bias() || m.router_bias;
  if (llama && !m.is_mla() && (biases || m.activation_clamp > 0))
    p.add(fmt::format("the checkpoint holds the Llama layer with {}{}{}: no Hugging Face class the export writes holds "
                      "them (GptOssForCausalLM's names are not written yet)",
                      biases ? "biases" : "", biases && m.activation_clamp > 0 ? " and " : "",
                      m.activation_clamp > 0 ? fmt::format("the gated unit clamped at {:g}", m.activation_clamp) : ""),
          "keep the checkpoint for `trident train --init-from` / `generate`; export a model without "
          "--add-bias-linear / --add-qkv-bias / --activation-func-clamp-value", "export-architecture");
  // Multi-head latent attention is DeepseekV3ForCausalLM's, with its router and MTP layers.
  if (m.is_mla()) return check_deepseek_v3_exportable(m, p);
  // DeepSeek-V3's multi-token prediction: its Hugging Face names (model.layers.{num_hidden_layers}.*)
  // belong to DeepseekV3ForCausalLM, which needs multi-head latent attention; Llama's, Mixtral's and
  // Qwen's classes have no MTP layer, so the export would drop it.
  if (m.mtp_layers > 0)
    p.add(fmt::format("the checkpoint holds {} multi-token-prediction layer{}: no Hugging Face class the export "
                      "writes for a model without multi-head latent attention has one (DeepseekV3ForCausalLM "
                      "needs it)",
                      m.mtp_layers, m.mtp_layers > 1 ? "s" : ""),
          "keep the checkpoint for `trident train --init-from` / `generate`; export a model trained without "
          "--mtp-num-layers", "export-architecture");
  // DeepSeek-V3's router: Hugging Face's DeepseekV3ForCausalLM has it, with multi-head latent
  // attention; Mixtral's and Qwen's classes score by softmax.
  if (m.is_moe() && (m.router_score != "softmax" || m.router_expert_bias || m.router_topk_scaling != 1.0 ||
                     m.router_groups > 0))
    p.add(fmt::format("the checkpoint holds a mixture of experts with DeepSeek-V3's router ({} scores{}{}{}): "
                      "MixtralForCausalLM, Qwen2MoeForCausalLM and Qwen3MoeForCausalLM score by softmax without an "
                      "expert bias or scaling, and DeepseekV3ForCausalLM needs multi-head latent attention",
                      m.router_score, m.router_expert_bias ? ", an expert bias" : "",
                      m.router_topk_scaling != 1.0 ? fmt::format(", weights x {:g}", m.router_topk_scaling) : "",
                      m.router_groups > 0 ? fmt::format(", {} groups, top {}", m.router_groups, m.router_group_topk) : ""),
          "train with the softmax router (no --moe-router-score-function sigmoid, --moe-router-enable-expert-bias, "
          "--moe-router-topk-scaling-factor or --moe-router-num-groups) to export it",
          "export-moe");
}

HfModel hf_model(const CheckpointReader& reader, const ModelSpec& m, const nn::MoeOptions& router) {
  const HfClass cls = hf_class(m, router);
  HfModel out{hf_class_names(cls), {}, hf_config(m, cls, router)};
  // Pieces of one logical tensor come together (a layer's experts alternate between two): a
  // small cache reads each logical tensor once.
  std::map<std::string, CheckpointReader::Tensor> cache;
  std::vector<std::vector<float>> bias;  // DeepSeek-V3's expert bias, from the meta
  if (m.is_moe() && m.router_expert_bias)
    bias = engine::expert_bias_from_json(reader.meta(), engine::expert_bias_layers(m), m.experts);
  for (const HfPiece& piece : hf_pieces(m, cls)) {
    if (piece.op == HfPiece::Op::ExpertBias) {
      out.tensors.push_back({piece.hf_name, piece.hf_shape, bias.at(size_t(piece.row))});
      continue;
    }
    if (piece.op == HfPiece::Op::Zeros) {
      int64_t n = 1;
      for (int64_t d : piece.hf_shape) n *= d;
      out.tensors.push_back({piece.hf_name, piece.hf_shape, std::vector<float>(size_t(n), 0.0f)});
      continue;
    }
    if (!cache.count(piece.name)) {
      if (cache.size() >= 2) cache.clear();
      cache.emplace(piece.name, reader.tensor(piece.name));
    }
    const CheckpointReader::Tensor& t = cache.at(piece.name);
    out.tensors.push_back({piece.hf_name, piece.hf_shape, to_hf(piece, t.data.data(), t.cols())});
  }
  return out;
}

std::vector<float> to_hf(const HfPiece& piece, const float* tensor, int64_t cols) {
  int64_t n = 1;
  for (int64_t d : piece.hf_shape) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  const float* src = tensor + piece.row * cols;
  const int64_t rows = cols > 0 ? n / cols : 0;
  switch (piece.op) {
    case HfPiece::Op::Zeros:
    case HfPiece::Op::ExpertBias: break;
    case HfPiece::Op::Copy:
    case HfPiece::Op::Tied: std::copy(src, src + n, out.begin()); break;
    case HfPiece::Op::Doubled:
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = 2.0f * src[i];
      break;
    case HfPiece::Op::Transpose:  // [r, c] -> [c, r]
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[size_t(j * rows + i)] = src[i * cols + j];
      break;
    case HfPiece::Op::HalfRotary:
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t to = half_rotary_row(r, piece.head_dim);
        std::copy(src + r * cols, src + (r + 1) * cols, out.begin() + to * cols);
      }
      break;
  }
  return out;
}

void from_hf(const HfPiece& piece, const std::vector<float>& hf, float* tensor, int64_t cols) {
  const int64_t n = int64_t(hf.size()), rows = cols > 0 ? n / cols : 0;
  float* dst = tensor + piece.row * cols;
  switch (piece.op) {
    case HfPiece::Op::Zeros:
    case HfPiece::Op::Tied:  // the other piece of `name` fills it
    case HfPiece::Op::ExpertBias: break;
    case HfPiece::Op::Copy: std::copy(hf.begin(), hf.end(), dst); break;
    case HfPiece::Op::Doubled:  // a power of two: halving undoes the export exactly
      for (int64_t i = 0; i < n; ++i) dst[i] = 0.5f * hf[size_t(i)];
      break;
    case HfPiece::Op::Transpose:  // [c, r] -> [r, c]
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = hf[size_t(j * rows + i)];
      break;
    case HfPiece::Op::HalfRotary:
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t from = half_rotary_row(r, piece.head_dim);
        std::copy(hf.begin() + from * cols, hf.begin() + (from + 1) * cols, dst + r * cols);
      }
      break;
  }
}

int64_t half_rotary_row(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, j = row % head_dim;
  return head * head_dim + (j % 2 == 0 ? j / 2 : head_dim / 2 + j / 2);
}

nlohmann::json hf_rope_scaling(const RopeScaling& r) {
  if (r.type == "llama3")
    return {{"rope_type", "llama3"},
            {"factor", r.factor},
            {"low_freq_factor", r.low_freq_factor},
            {"high_freq_factor", r.high_freq_factor},
            {"original_max_position_embeddings", r.original_max_position}};
  // YaRN with every key it reads, so Hugging Face derives the same frequencies and attention factor
  // (mscale 1 with mscale_all_dim 0 reads as get_mscale(factor), as when both are absent).
  if (r.type == "yarn")
    return {{"rope_type", "yarn"},         {"factor", r.factor},
            {"original_max_position_embeddings", r.original_max_position},
            {"beta_fast", r.beta_fast},     {"beta_slow", r.beta_slow},
            {"mscale", r.mscale},           {"mscale_all_dim", r.mscale_all_dim},
            {"truncate", r.truncate}};
  return nullptr;
}

}  // namespace trident::checkpoint
