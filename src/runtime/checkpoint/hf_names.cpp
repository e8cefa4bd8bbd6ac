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
#include "runtime/checkpoint/hf_names.h"

#include <fmt/format.h>

namespace trident::checkpoint {
namespace {

// The one place export touches the checkpoint: a whole logical tensor by name.
NamedTensor read_tensor(const CheckpointReader& reader, const std::string& name, const std::string& hf_name,
                        bool transpose) {
  CheckpointReader::Tensor t = reader.tensor(name);
  NamedTensor out{hf_name, t.shape, std::move(t.data)};
  if (transpose && t.shape.size() == 2) {
    const int64_t r = t.shape[0], c = t.shape[1];
    std::vector<float> tr(out.data.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) tr[size_t(j * r + i)] = out.data[size_t(i * c + j)];
    out.data = std::move(tr);
    out.shape = {c, r};
  }
  return out;
}

std::vector<NamedTensor> gpt2_tensors(const CheckpointReader& reader, const ModelSpec& m) {
  std::vector<NamedTensor> t;
  t.push_back(read_tensor(reader, "wte", "transformer.wte.weight", false));
  t.push_back(read_tensor(reader, "wpe", "transformer.wpe.weight", false));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("transformer.h.{}.", l);
    t.push_back(read_tensor(reader, p + "ln1_w", h + "ln_1.weight", false));
    t.push_back(read_tensor(reader, p + "ln1_b", h + "ln_1.bias", false));
    t.push_back(read_tensor(reader, p + "qkv_w", h + "attn.c_attn.weight", true));
    t.push_back(read_tensor(reader, p + "qkv_b", h + "attn.c_attn.bias", false));
    t.push_back(read_tensor(reader, p + "attn_proj_w", h + "attn.c_proj.weight", true));
    t.push_back(read_tensor(reader, p + "attn_proj_b", h + "attn.c_proj.bias", false));
    t.push_back(read_tensor(reader, p + "ln2_w", h + "ln_2.weight", false));
    t.push_back(read_tensor(reader, p + "ln2_b", h + "ln_2.bias", false));
    t.push_back(read_tensor(reader, p + "fc_w", h + "mlp.c_fc.weight", true));
    t.push_back(read_tensor(reader, p + "fc_b", h + "mlp.c_fc.bias", false));
    t.push_back(read_tensor(reader, p + "fc_proj_w", h + "mlp.c_proj.weight", true));
    t.push_back(read_tensor(reader, p + "fc_proj_b", h + "mlp.c_proj.bias", false));
  }
  t.push_back(read_tensor(reader, "lnf_w", "transformer.ln_f.weight", false));
  t.push_back(read_tensor(reader, "lnf_b", "transformer.ln_f.bias", false));
  return t;
}

// Rows [first, first + rows) of a [R, C] tensor.
NamedTensor row_block(const NamedTensor& t, int64_t first, int64_t rows, const std::string& name) {
  const int64_t C = t.shape.size() > 1 ? t.shape[1] : 1;
  NamedTensor out{name, t.shape.size() > 1 ? std::vector<int64_t>{rows, C} : std::vector<int64_t>{rows}, {}};
  out.data.assign(t.data.begin() + first * C, t.data.begin() + (first + rows) * C);
  return out;
}

// Interleaved rotary pairs (2i, 2i+1) to halves (i, i + hd/2), head by head (see the top).
void to_half_rotary(NamedTensor& t, int64_t head_dim) {
  const int64_t R = t.shape[0], C = t.shape[1], half = head_dim / 2;
  std::vector<float> out(t.data.size());
  for (int64_t r = 0; r < R; ++r) {
    const int64_t head = r / head_dim, j = r % head_dim;
    const int64_t to = head * head_dim + (j % 2 == 0 ? j / 2 : half + j / 2);
    std::copy(t.data.begin() + r * C, t.data.begin() + (r + 1) * C, out.begin() + to * C);
  }
  t.data = std::move(out);
}

// Layer l's router and experts under Mixtral's names (see the top).
void mixtral_experts(const CheckpointReader& reader, const ModelSpec& m, int64_t l, std::vector<NamedTensor>& t) {
  const int64_t F = m.expert_ffn_hidden, C = m.hidden;
  const std::string p = fmt::format("layers.{}.", l), h = fmt::format("model.layers.{}.block_sparse_moe.", l);
  t.push_back(read_tensor(reader, p + "router_w", h + "gate.weight", false));
  const NamedTensor gate_up = read_tensor(reader, p + "experts.gate_up_w", "", false);
  const NamedTensor down = read_tensor(reader, p + "experts.fc_proj_w", "", false);
  for (int64_t j = 0; j < m.experts; ++j) {
    const std::string e = fmt::format("{}experts.{}.", h, j);
    t.push_back(row_block(gate_up, j * 2 * F, F, e + "w1.weight"));
    t.push_back(row_block(down, j * C, C, e + "w2.weight"));
    t.push_back(row_block(gate_up, j * 2 * F + F, F, e + "w3.weight"));
  }
}

std::vector<NamedTensor> llama_tensors(const CheckpointReader& reader, const ModelSpec& m) {
  const int64_t hd = m.head_dim(), kv = m.kv_dim(), F = m.ffn_hidden;
  std::vector<NamedTensor> t;
  t.push_back(read_tensor(reader, "wte", "model.embed_tokens.weight", false));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l), h = fmt::format("model.layers.{}.", l);
    t.push_back(read_tensor(reader, p + "ln1_w", h + "input_layernorm.weight", false));
    t.push_back(read_tensor(reader, p + "q_w", h + "self_attn.q_proj.weight", false));
    to_half_rotary(t.back(), hd);
    const NamedTensor kv_w = read_tensor(reader, p + "kv_w", "", false);
    t.push_back(row_block(kv_w, 0, kv, h + "self_attn.k_proj.weight"));
    to_half_rotary(t.back(), hd);
    t.push_back(row_block(kv_w, kv, kv, h + "self_attn.v_proj.weight"));
    t.push_back(read_tensor(reader, p + "attn_proj_w", h + "self_attn.o_proj.weight", false));
    t.push_back(read_tensor(reader, p + "ln2_w", h + "post_attention_layernorm.weight", false));
    if (m.is_moe()) {
      mixtral_experts(reader, m, l, t);
      continue;
    }
    const NamedTensor gate_up = read_tensor(reader, p + "gate_up_w", "", false);
    t.push_back(row_block(gate_up, 0, F, h + "mlp.gate_proj.weight"));
    t.push_back(row_block(gate_up, F, F, h + "mlp.up_proj.weight"));
    t.push_back(read_tensor(reader, p + "fc_proj_w", h + "mlp.down_proj.weight", false));
  }
  t.push_back(read_tensor(reader, "lnf_w", "model.norm.weight", false));
  t.push_back(read_tensor(reader, "head_w", "lm_head.weight", false));
  return t;
}

nlohmann::json llama_config(const ModelSpec& m) {
  return {{"architectures", {"LlamaForCausalLM"}},
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
}

// Llama's attention and norms, Mixtral's experts. Hugging Face's load-balancing loss is
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

void check_hf_exportable(const ModelSpec& m, const nn::MoeOptions& router, Problems& p) {
  const bool llama = m.family == ModelFamily::Llama;
  if (llama && m.tied_embeddings())
    p.add("the checkpoint holds a Llama model with a tied head, which Hugging Face's Llama does not load",
          "export a Llama checkpoint with its own head (the runtime's default)", "export-family");
  if (!m.is_moe()) return;
  if (!llama) {
    p.add(fmt::format("the checkpoint holds a GPT-family mixture of experts ({} GELU experts per layer), which no "
                      "Hugging Face class loads (MixtralForCausalLM is Llama-shaped: SwiGLU experts, RMSNorm, RoPE)",
                      m.experts),
          "train the mixture of experts with --family llama to export it as Mixtral", "export-moe");
    return;
  }
  const std::string cls = "MixtralForCausalLM";
  if (m.shared_experts > 0)
    p.add(fmt::format("--shared-experts {}: {} has no shared experts", m.shared_experts, cls),
          "train without --shared-experts to export as Mixtral", "export-moe");
  if (m.moe_dense_layers > 0)
    p.add(fmt::format("--moe-dense-layers {}: every layer of {} is a mixture of experts", m.moe_dense_layers, cls),
          "train without --moe-dense-layers to export as Mixtral", "export-moe");
  if (m.moe_layer_freq > 1)
    p.add(fmt::format("--moe-layer-freq {}: every layer of {} is a mixture of experts", m.moe_layer_freq, cls),
          "train with --moe-layer-freq 1 (the default) to export as Mixtral", "export-moe");
  if (!router.normalise)
    p.add("--no-moe-normalise: " + cls + " weighs a token's chosen experts by their scores over their sum",
          "train with --moe-normalise (the default) to export as Mixtral", "export-moe");
}

HfModel hf_model(const CheckpointReader& reader, const ModelSpec& m, const nn::MoeOptions& router) {
  if (m.family == ModelFamily::GPT) return {"GPT-2", gpt2_tensors(reader, m), gpt2_config(m)};
  if (m.is_moe()) return {"Hugging Face Mixtral", llama_tensors(reader, m), mixtral_config(m, router)};
  return {"Hugging Face Llama", llama_tensors(reader, m), llama_config(m)};
}

}  // namespace trident::checkpoint
