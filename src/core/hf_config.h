// A model read from a Hugging Face config.json (`--hf-config PATH`, or `hf-config` in a TOML).
//
// The families people pretrain today: GPT-2, Llama 2/3/3.1/4 (the text model), Mistral,
// Mixtral, Qwen2/2.5/3 dense and MoE, DeepSeek-V2/V3, GPT-OSS, Grok-1 and Nemotron-4. Every key
// that changes memory, time or the launched job is read into the ModelSpec; a key that is not
// understood is refused by name unless it is on the list of keys known to change none of them
// (token ids, initialisation, dtype of the checkpoint, ...). A value Trident cannot model (a rope
// scaling type it does not know, a layer pattern it cannot express) is refused by name too:
// never dropped.
#pragma once

#include <optional>
#include <string>

#include "core/model_spec.h"
#include "core/problems.h"

namespace trident {

// The model of the JSON text `text` (read from `origin`, for the messages); nullopt and
// problems when it is not JSON, not a known family, or has keys or values Trident cannot
// model. The sequence length is `seq_len` when given (--seq-len: the training length), else the
// config's max_position_embeddings; the checks that depend on it (a chunked or windowed
// attention shorter than the sequence) take that length.
std::optional<ModelSpec> model_from_hf_config(const std::string& text, const std::string& origin, Problems& problems,
                                              std::optional<int64_t> seq_len = std::nullopt);

// The file a flag names, read and converted (read_settings_file's checks first).
std::optional<ModelSpec> model_from_hf_config_file(const std::string& path, const std::string& flag,
                                                   Problems& problems, std::optional<int64_t> seq_len = std::nullopt);

// The text looks like JSON (its first non-blank character is '{'): a config.json given where a
// TOML file is expected.
bool looks_like_json(const std::string& text);

}  // namespace trident
