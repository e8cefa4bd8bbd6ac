// ModelSpec: the shape of a decoder-only transformer, and its exact parameter count.
//
// Two families cover the presets: GPT (learned positions, LayerNorm with biases, GELU MLP,
// biases everywhere, tied input/output embedding) and Llama (RoPE, RMSNorm, SwiGLU MLP,
// grouped-query attention, no biases, untied output embedding).
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

  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_dim() const { return kv_heads * head_dim(); }  // width of K (and of V)
  bool tied_embeddings() const { return family == ModelFamily::GPT; }
  bool learned_positions() const { return family == ModelFamily::GPT; }
  bool has_biases() const { return family == ModelFamily::GPT; }
  // Number of matrices in the MLP: 2 for GELU (up, down), 3 for SwiGLU (gate, up, down).
  int64_t mlp_matrices() const { return family == ModelFamily::GPT ? 2 : 3; }
};

// Parameter counts, term by term, so a user can check them by hand.
struct ParamCount {
  int64_t attention_per_layer = 0;  // QKV and output projection, with biases when the family has them
  int64_t mlp_per_layer = 0;        // MLP matrices and biases
  int64_t norms_per_layer = 0;      // two LayerNorms (weight+bias) or two RMSNorms (weight)
  int64_t per_layer = 0;            // sum of the three above
  int64_t token_embedding = 0;      // V*h
  int64_t position_embedding = 0;   // s*h for learned positions, 0 for RoPE
  int64_t final_norm = 0;           // 2h (LayerNorm) or h (RMSNorm)
  int64_t output_layer = 0;         // V*h when untied, 0 when tied to the token embedding
  int64_t total = 0;
};

ParamCount count_parameters(const ModelSpec& model);

// Preset by name ("gpt3-175b", "gpt2-small", "llama2-7b", ...). Throws InputError listing the names.
ModelSpec model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
bool is_model_preset(const std::string& name);

// Shape checks that do not depend on a layout (positive sizes, heads divide hidden, ...).
void validate_model(const ModelSpec& model, Problems& problems);

}  // namespace trident
