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
// to compute as training did (softmax scores, the chosen weights normalised or not) and the
// training-only ones (dropping, the auxiliary losses' coefficients) for a person reading it.
nlohmann::json router_to_json(const nn::MoeOptions& o);
// The settings a meta holds; a key it lacks keeps the training default. Throws InputError on a
// value of the wrong kind.
nn::MoeOptions router_from_json(const nlohmann::json& j);

}  // namespace trident::engine
