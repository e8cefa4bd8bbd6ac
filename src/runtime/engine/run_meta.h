// JSON forms of a model and of a tokenizer, as stored in checkpoints.
#pragma once

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "runtime/data/tokenizer.h"

namespace trident::engine {

nlohmann::json model_to_json(const ModelSpec& m);
ModelSpec model_from_json(const nlohmann::json& j);  // throws InputError on missing keys
nlohmann::json tokenizer_to_json(const data::Tokenizer& t);
data::Tokenizer tokenizer_from_json(const nlohmann::json& j);

}  // namespace trident::engine
