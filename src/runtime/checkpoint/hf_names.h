// A checkpoint's weights under Hugging Face's names and the config.json of the matching
// transformers class: GPT2LMHeadModel (GPT), LlamaForCausalLM (Llama), MixtralForCausalLM (a
// Llama-family mixture of experts with every layer routed, no shared experts, normalised weights)
// and Qwen2MoeForCausalLM (any other Llama-family mixture of experts); a Llama-family model with
// QK-norm: Qwen3ForCausalLM (dense) or Qwen3MoeForCausalLM; a model with multi-head latent attention:
// DeepseekV3ForCausalLM (with its MTP layers, as the released checkpoint holds them). hf_names.cpp
// and hf_deepseek.cpp spell out each mapping.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/problems.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/nn/moe_routing.h"

namespace trident::checkpoint {

struct HfModel {
  std::string names;  // "GPT-2", "Hugging Face Llama", "Hugging Face Mixtral", "Hugging Face Qwen2-MoE", ..."
  std::vector<NamedTensor> tensors;
  nlohmann::json config;
};

// The Hugging Face class that holds a model (see the top).
enum class HfClass { Gpt2, Llama, Mixtral, Qwen2Moe, Qwen3, Qwen3Moe, DeepseekV3 };
HfClass hf_class(const ModelSpec& m, const nn::MoeOptions& router);
const char* hf_class_names(HfClass cls);  // "GPT-2", "Hugging Face Llama", ...

// One Hugging Face tensor and where it sits in a logical tensor: THE mapping, read one way by
// export and the other by import, so both agree by construction.
struct HfPiece {
  enum class Op {
    Copy,        // rows [row, row + hf_shape[0]) of `name`, as they are
    Transpose,   // the whole of `name` transposed (GPT-2's Conv1D keeps [in, out])
    HalfRotary,  // rows from `row`, each head's rotary pairs (2i, 2i+1) moved to (i, i + hd/2)
    Doubled,     // rows from `row` times 2 (Qwen2-MoE's shared expert behind its zero gate)
    Zeros,       // a tensor the class has and Trident's model lacks: zeros (name is empty)
    Tied,        // a second copy of the logical tensor `name` another piece holds whole (DeepSeek-V3's
                 // MTP embed_tokens and shared_head.head): export writes it, import checks it equals
    ExpertBias,  // DeepSeek-V3's e_score_correction_bias: row `row` of the meta's expert bias (no tensor)
  };
  std::string hf_name;
  std::vector<int64_t> hf_shape;
  std::string name;  // logical tensor
  int64_t row = 0;
  Op op = Op::Copy;
  int64_t head_dim = 0;  // HalfRotary
};

// Every tensor of the class's checkpoint of model m, in the order export writes them.
std::vector<HfPiece> hf_pieces(const ModelSpec& m, HfClass cls);
// The class's config.json for m.
nlohmann::json hf_config(const ModelSpec& m, HfClass cls, const nn::MoeOptions& router);
// A piece's values from its logical tensor (row-major, `cols` columns), and back into it.
std::vector<float> to_hf(const HfPiece& piece, const float* tensor, int64_t cols);
void from_hf(const HfPiece& piece, const std::vector<float>& hf, float* tensor, int64_t cols);
// The row Hugging Face's rotate-half layout gives row `row` of Meta's interleaved one.
int64_t half_rotary_row(int64_t row, int64_t head_dim);

// The DeepSeek-V3 mapping (hf_deepseek.cpp).
std::vector<HfPiece> deepseek_v3_pieces(const ModelSpec& m);
nlohmann::json deepseek_v3_config(const ModelSpec& m, const nn::MoeOptions& router);
// The model's rope_scaling as config.json writes it (Llama 3.1's, or YaRN's every key), null without one.
nlohmann::json hf_rope_scaling(const RopeScaling& r);
void check_deepseek_v3_exportable(const ModelSpec& m, Problems& problems);

// What the model has that no Hugging Face class computes: one problem per setting, naming it.
// Nothing added = exportable. (A router of another score function is refused when the meta is
// read: the runtime computes softmax scores only.)
void check_hf_exportable(const ModelSpec& m, Problems& problems);

// The tensors and config of an exportable model (check_hf_exportable added nothing); router: the
// settings the mixture of experts trained with (which class holds it, norm_topk_prob, the aux
// loss coefficient); DeepSeek-V3's expert bias is read from the checkpoint's meta.
HfModel hf_model(const CheckpointReader& reader, const ModelSpec& m, const nn::MoeOptions& router);

}  // namespace trident::checkpoint
