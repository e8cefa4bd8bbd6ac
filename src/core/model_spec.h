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
  // Mixture of experts (all 0 for a dense model).
  int64_t experts = 0;             // routed experts per MoE layer
  int64_t experts_per_token = 0;   // top-k
  int64_t expert_ffn_hidden = 0;   // width of one expert's MLP
  int64_t shared_experts = 0;      // experts every token passes through (DeepSeek), same width
  int64_t moe_dense_layers = 0;    // leading layers that keep a dense MLP of ffn_hidden
  // After them, every moe_layer_freq-th layer is a MoE layer (1: all of them; 2: every other one,
  // starting with the first), the rest keep the dense MLP.
  int64_t moe_layer_freq = 1;
  double capacity_factor = 1.0;    // busiest expert's tokens over the mean, at most
  // The rows the most loaded expert-parallel rank's experts take in a dispatch, over the mean
  // over the ep ranks (1 = balanced): the other ranks wait for its expert GEMMs at the combine.
  double moe_load_imbalance = 1.0;

  bool is_moe() const { return experts > 0; }
  // Layer l (0-based, of the whole model) is a MoE layer.
  bool is_moe_layer(int64_t l) const {
    return is_moe() && moe_layer_freq > 0 && l >= moe_dense_layers && l < layers &&
           (l - moe_dense_layers) % moe_layer_freq == 0;
  }
  int64_t moe_layers() const {
    return is_moe() && layers > moe_dense_layers && moe_layer_freq > 0
               ? (layers - moe_dense_layers + moe_layer_freq - 1) / moe_layer_freq
               : 0;
  }
  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }  // width of K (and of V)
  int tied = -1;  // output layer tied to the token embedding: -1 the family's default (GPT yes, Llama no), 0 no, 1 yes
  bool tied_embeddings() const { return tied < 0 ? family == ModelFamily::GPT : tied == 1; }
  // LayerNorm / RMSNorm epsilon: 1e-5 in both families (GPT-2/3, Llama 3), as the runtime's kernels use.
  double norm_epsilon() const { return 1e-5; }
  bool learned_positions() const { return family == ModelFamily::GPT; }
  // Hidden and attention dropout: -1 the family's default (GPT yes, Llama no), 0 off, 1 on. Off
  // (p = 0, as BLOOM trained) PyTorch runs no dropout kernel and keeps no mask, so the layer stores
  // neither the masks nor the dropped attention probabilities (memory_model.h, layer_activations).
  int dropout = -1;
  bool has_dropout() const { return dropout < 0 ? family == ModelFamily::GPT : dropout == 1; }
  bool has_biases() const { return family == ModelFamily::GPT; }
  // Number of matrices in the MLP: 2 for GELU (up, down), 3 for SwiGLU (gate, up, down).
  int64_t mlp_matrices() const { return family == ModelFamily::GPT ? 2 : 3; }
};

// Parameter counts, term by term, so a user can check them by hand.
struct ParamCount {
  int64_t attention_per_layer = 0;  // QKV and output projection, with biases when the family has them
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
