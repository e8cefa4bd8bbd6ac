// A checkpoint's weights under Hugging Face's names and the config.json of the matching
// transformers class: GPT2LMHeadModel (GPT), LlamaForCausalLM (Llama), MixtralForCausalLM (a
// Llama-family mixture of experts with every layer routed, no shared experts, normalised weights)
// and Qwen2MoeForCausalLM (any other Llama-family mixture of experts). hf_names.cpp spells out
// each mapping.
#pragma once

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
  std::string names;  // "GPT-2", "Hugging Face Llama", "Hugging Face Mixtral", "Hugging Face Qwen2-MoE"
  std::vector<NamedTensor> tensors;
  nlohmann::json config;
};

// What the model has that no Hugging Face class computes: one problem per setting, naming it.
// Nothing added = exportable. (A router of another score function is refused when the meta is
// read: the runtime computes softmax scores only.)
void check_hf_exportable(const ModelSpec& m, Problems& problems);

// The tensors and config of an exportable model (check_hf_exportable added nothing); router: the
// settings the mixture of experts trained with (which class holds it, norm_topk_prob, the aux
// loss coefficient).
HfModel hf_model(const CheckpointReader& reader, const ModelSpec& m, const nn::MoeOptions& router);

}  // namespace trident::checkpoint
