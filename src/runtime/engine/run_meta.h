// JSON forms of a model and of a tokenizer, as stored in checkpoints.
#pragma once

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "runtime/data/tokenizer.h"
#include "runtime/nn/moe_routing.h"

namespace trident::engine {

nlohmann::json model_to_json(const ModelSpec& m);
ModelSpec model_from_json(const nlohmann::json& j);  // throws InputError on missing keys
nlohmann::json tokenizer_to_json(const data::Tokenizer& t);
data::Tokenizer tokenizer_from_json(const nlohmann::json& j);
// A mixture-of-experts run's router settings (meta "router"): what a reader of the weights needs
// to compute as training did (softmax or sigmoid scores, the chosen weights normalised or not) and the
// training-only ones (dropping, the auxiliary losses' coefficients) for a person reading it.
nlohmann::json router_to_json(const nn::MoeOptions& o);
// The settings a meta holds, with the model's part of them (use_model_router); a key it lacks
// keeps the training default. Throws InputError on a value of the wrong kind or a score function
// other than the model's.
nn::MoeOptions router_from_json(const nlohmann::json& j, const ModelSpec& m);
// The model's part of the router settings (its score function, routed scaling, expert bias and
// capacity factor: ModelSpec's), into o.
void use_model_router(nn::MoeOptions& o, const ModelSpec& m);
// A checkpoint meta's expert bias (meta.router.expert_bias: layers rows of experts values);
// throws InputError naming it when it is missing or of another shape.
std::vector<std::vector<float>> expert_bias_from_json(const nlohmann::json& meta, int64_t layers, int64_t experts);
// The rows of that table: the model's MoE layers, then its MTP layers when they are MoE layers
// (an MTP layer is of the last layer's kind; the trainer's order).
int64_t expert_bias_layers(const ModelSpec& m);

}  // namespace trident::engine
