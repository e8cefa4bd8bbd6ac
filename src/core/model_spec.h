// ModelSpec: the shape of a decoder-only transformer, and its exact parameter count.
//
// Two families cover the presets: GPT (learned positions, LayerNorm with biases, GELU MLP,
// biases everywhere, tied input/output embedding) and Llama (RoPE, RMSNorm, SwiGLU MLP,
// grouped-query attention, no biases, untied output embedding).
//
// A mixture-of-experts model (experts > 0) replaces the MLP of every moe_layer_freq-th layer
// after the first moe_dense_layers (Megatron's --moe-layer-freq) with a router and `experts`
// expert MLPs of width expert_ffn_hidden, of which each token uses experts_per_token (top-k),
// plus shared_experts that every token uses. The capacity factor bounds the tokens an expert
// takes at capacity_factor x the mean (tokens x top-k / experts); it sizes the activation memory,
// and the step-time model charges the balanced load (plan/mixture_of_experts.h), plus the wait
// for the most loaded expert-parallel rank at moe_load_imbalance (a planning assumption: the
// runtime routes as the router decides, and `trident train` measures it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

enum class ModelFamily { GPT, Llama };

// Rotary-embedding frequency scaling for long contexts, as Hugging Face's rope_scaling names it.
struct RopeScaling {
  std::string type;  // "" none, "linear", "llama3" (Llama 3.1), "yarn" (DeepSeek-V3, GPT-OSS)
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 1.0;  // llama3
  int64_t original_max_position = 0;                     // llama3, yarn
  double beta_fast = 0, beta_slow = 0, mscale = 0, mscale_all_dim = 0;  // yarn
  bool truncate = true;  // yarn: the correction range rounded to whole pairs (GPT-OSS: false)
};

std::string to_string(ModelFamily family);

struct ModelSpec {
  std::string name = "custom";
  ModelFamily family = ModelFamily::GPT;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;    // = heads for plain multi-head attention
  int64_t ffn_hidden = 0;  // 4*hidden for GPT; the SwiGLU width for Llama
  int64_t seq_len = 0;
  int64_t vocab = 0;
  double rope_theta = 10000.0;  // Llama: base of the rotary embedding angles (Llama 3: 500000)
  RopeScaling rope_scaling;     // none unless a config says so (Llama 3.1's "llama3", DeepSeek's "yarn")
  double rotary_percent = 1.0;  // share of each head's features rotated (Nemotron-4: 0.5)
  double norm_eps = 1e-5;       // LayerNorm / RMSNorm epsilon (Qwen: 1e-6)
  // Attention beyond the family's defaults (0 / -1: the family's).
  int64_t head_size = 0;        // width of one query/key/value head; 0 = hidden / heads (Qwen3: 128 on hidden 2048 x 32 heads)
  bool qk_norm = false;         // RMSNorm over each head's queries and keys (Qwen3), head_dim weights each
  int qkv_bias = -1;            // biases on Q, K, V: -1 the family's (GPT yes), 0 no, 1 yes (Qwen2, GPT-OSS)
  int proj_bias = -1;           // bias on the attention output projection: -1 the family's, 0 no, 1 yes (GPT-OSS)
  int mlp_bias = -1;            // biases on the MLP / expert matrices: -1 the family's, 0 no, 1 yes (GPT-OSS)
  int gated_mlp = -1;           // -1 the family's (GPT: GELU, 2 matrices; Llama: SwiGLU, 3), 0 two matrices (Nemotron-4's squared ReLU), 1 gated
  int layer_norm = -1;          // -1 the family's (GPT LayerNorm with bias, Llama RMSNorm), 1 LayerNorm (Nemotron-4)
  std::string activation;       // "" the family's (gelu / silu); "relu2" squared ReLU (Nemotron-4)
  double activation_clamp = 0;  // GPT-OSS: the gated unit's inputs clamped to this (swiglu_limit), its linear half offset by 1; 0 none
  // Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank > 0 turns it on; heads of
  // qk_nope_head_dim + qk_rope_head_dim for queries and keys and v_head_dim for values, keys
  // and values projected up from a shared latent of kv_lora_rank (+ one rope key of
  // qk_rope_head_dim), queries from one of q_lora_rank (0: projected directly from h).
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Sliding-window attention: layer l (0-based) attends to the last sliding_window keys, unless
  // (l + 1) % full_attention_every == 0 (Megatron's window_attn_skip_freq; GPT-OSS: 2, every
  // other layer full; 0: every layer windowed). 0 = no window.
  int64_t sliding_window = 0;
  int64_t full_attention_every = 0;
  bool attention_sinks = false;  // one learned logit per head and layer (GPT-OSS's learnable softmax)
  int64_t mtp_layers = 0;        // multi-token-prediction modules after the last layer (DeepSeek-V3: 1)
  // Mixture of experts (all 0 for a dense model).
  int64_t experts = 0;             // routed experts per MoE layer
  int64_t experts_per_token = 0;   // top-k
  int64_t expert_ffn_hidden = 0;   // width of one expert's MLP
  int64_t shared_experts = 0;      // experts every token passes through (DeepSeek), same width
  int64_t moe_dense_layers = 0;    // leading layers that keep a dense MLP of ffn_hidden
  // After them, every moe_layer_freq-th layer is a MoE layer (1: all of them; 2: every other one,
  // starting with the first), the rest keep the dense MLP.
  int64_t moe_layer_freq = 1;
  // Which layer of each moe_layer_freq group is the MoE one: 0 the first (Megatron's i % N == 0),
  // N-1 the last (Llama 4's interleave_moe_layer_step: layers 1, 3, 5, ... with N = 2).
  int64_t moe_layer_phase = 0;
  int64_t shared_expert_ffn_hidden = 0;  // width of one shared expert; 0 = expert_ffn_hidden (DeepSeek)
  bool shared_expert_gate = false;       // a sigmoid gate (h -> 1) on the shared experts' output (Qwen2-MoE)
  std::string router_score = "softmax";  // "softmax" or "sigmoid" (DeepSeek-V3, Llama 4)
  bool router_bias = false;              // the router's linear has a bias (GPT-OSS)
  bool router_expert_bias = false;       // a per-expert score-correction bias (DeepSeek-V3's aux-loss-free balancing)
  int64_t router_groups = 0;             // experts in groups, each token to router_group_topk of them (DeepSeek-V3: 8, 4)
  int64_t router_group_topk = 0;
  double router_topk_scaling = 1.0;      // routed experts' weights scaled (DeepSeek-V3: 2.5)
  bool router_norm_topk = false;         // top-k weights renormalised to sum to 1 (Qwen3, Mixtral)
  double capacity_factor = 1.0;    // busiest expert's tokens over the mean, at most
  // The rows the most loaded expert-parallel rank's experts take in a dispatch, over the mean
  // over the ep ranks (1 = balanced): the other ranks wait for its expert GEMMs at the combine.
  double moe_load_imbalance = 1.0;

  bool is_moe() const { return experts > 0; }
  // Layer l (0-based, of the whole model) is a MoE layer.
  bool is_moe_layer(int64_t l) const {
    return is_moe() && moe_layer_freq > 0 && l >= moe_dense_layers && l < layers &&
           (l - moe_dense_layers) % moe_layer_freq == moe_layer_phase;
  }
  int64_t moe_layers() const {
    return is_moe() && layers > moe_dense_layers + moe_layer_phase && moe_layer_freq > 0
               ? (layers - moe_dense_layers - moe_layer_phase + moe_layer_freq - 1) / moe_layer_freq
               : 0;
  }
  int64_t head_dim() const { return head_size > 0 ? head_size : heads > 0 ? hidden / heads : 0; }
  // Widths of Q (and K per query head), of K and V, and of the projection's input (= V's per
  // query head). MLA (DeepSeek): Q and K of heads x (nope + rope), V of heads x v_head_dim, so
  // kv_dim is their mean (K and V together are 2 kv_dim wide, what a KV block or cache holds).
  int64_t q_dim() const { return is_mla() ? heads * (qk_nope_head_dim + qk_rope_head_dim) : heads * head_dim(); }
  int64_t kv_dim() const {
    return is_mla() ? heads * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) / 2 : kv_heads * head_dim();
  }
  int64_t v_dim() const { return is_mla() ? heads * v_head_dim : heads * head_dim(); }
  bool is_mla() const { return kv_lora_rank > 0; }
  // Layer l attends through a sliding window (of sliding_window keys).
  bool is_window_layer(int64_t l) const {
    return sliding_window > 0 && (full_attention_every <= 0 || (l + 1) % full_attention_every != 0);
  }
  // Keys a query attends to, averaged over the layers and the sequence, over those of causal
  // attention without a window ((s + 1) / 2): 1 without sliding windows; GPT-OSS's 128-token
  // window on every other layer of a 4096-token sequence about 0.53.
  double attended_key_share() const;
  int64_t shared_expert_width() const { return shared_expert_ffn_hidden > 0 ? shared_expert_ffn_hidden : expert_ffn_hidden; }
  int tied = -1;  // output layer tied to the token embedding: -1 the family's default (GPT yes, Llama no), 0 no, 1 yes
  bool tied_embeddings() const { return tied < 0 ? family == ModelFamily::GPT : tied == 1; }
  // LayerNorm / RMSNorm epsilon: 1e-5 by default in both families (GPT-2/3, Llama 3), as the runtime's kernels use.
  double norm_epsilon() const { return norm_eps; }
  bool learned_positions() const { return family == ModelFamily::GPT; }
  // Hidden and attention dropout: -1 the family's default (GPT yes, Llama no), 0 off, 1 on. Off
  // (p = 0, as BLOOM trained) PyTorch runs no dropout kernel and keeps no mask, so the layer stores
  // neither the masks nor the dropped attention probabilities (memory_model.h, layer_activations).
  int dropout = -1;
  bool has_dropout() const { return dropout < 0 ? family == ModelFamily::GPT : dropout == 1; }
  bool has_biases() const { return family == ModelFamily::GPT; }
  bool has_qkv_bias() const { return qkv_bias < 0 ? has_biases() : qkv_bias == 1; }
  bool has_proj_bias() const { return proj_bias < 0 ? has_biases() : proj_bias == 1; }
  bool has_mlp_bias() const { return mlp_bias < 0 ? has_biases() : mlp_bias == 1; }
  bool has_layer_norm() const { return layer_norm < 0 ? family == ModelFamily::GPT : layer_norm == 1; }  // else RMSNorm
  bool is_gated_mlp() const { return gated_mlp < 0 ? family == ModelFamily::Llama : gated_mlp == 1; }
  // Number of matrices in the MLP: 2 for GELU (up, down), 3 for SwiGLU (gate, up, down).
  int64_t mlp_matrices() const { return is_gated_mlp() ? 3 : 2; }
  // The architecture fields that depart from the two families the runtime trains (GPT, Llama):
  // "head_dim 128 (hidden / heads = 64)", "qk-norm", ... (empty: a plain GPT or Llama).
  std::vector<std::string> beyond_family() const;
};

// Parameter counts, term by term, so a user can check them by hand.
struct ParamCount {
  int64_t attention_per_layer = 0;  // QKV (or MLA's projections) and output projection, their biases, QK-norm weights, sinks
  int64_t mlp_per_layer = 0;        // dense MLP matrices and biases (the dense layers of a MoE model)
  int64_t norms_per_layer = 0;      // two LayerNorms (weight+bias) or two RMSNorms (weight)
  int64_t per_layer = 0;            // one layer: attention + MLP (MoE layer: router + experts) + norms
  // Mixture of experts, per MoE layer (0 for a dense model).
  int64_t router_per_layer = 0;        // h x experts
  int64_t expert_params = 0;           // one expert's MLP
  int64_t routed_experts_per_layer = 0;  // experts x expert_params
  int64_t shared_experts_per_layer = 0;  // shared_experts x expert_params
  int64_t dense_layer = 0;             // a dense layer of a MoE model (its first moe_dense_layers, and between MoE layers)
  int64_t token_embedding = 0;      // V*h
  int64_t position_embedding = 0;   // s*h for learned positions, 0 for RoPE
  int64_t final_norm = 0;           // 2h (LayerNorm) or h (RMSNorm)
  int64_t output_layer = 0;         // V*h when untied, 0 when tied to the token embedding
  // Multi-token prediction (not in total or active, as publishers count: DeepSeek-V3's 671B
  // leaves out its 14B MTP module): per module two RMSNorms of h, the 2h -> h projection, one
  // layer (a MoE layer when the model has them) and its final norm; embedding and head shared.
  int64_t mtp = 0;
  int64_t total = 0;
  int64_t active = 0;               // used by one token: total less the routed experts it skips
};

ParamCount count_parameters(const ModelSpec& model);

// Preset by name ("gpt3-175b", "gpt2-small", "llama2-7b", ...). Throws InputError listing the names.
ModelSpec model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
bool is_model_preset(const std::string& name);

// Shape checks that do not depend on a layout (positive sizes, heads divide hidden, ...).
void validate_model(const ModelSpec& model, Problems& problems);

}  // namespace trident
