// trident import: a Hugging Face model folder (config.json, model.safetensors or sharded
// *.safetensors with model.safetensors.index.json) into a Trident checkpoint.
//
// The config is read by the one reader of config.json (core/hf_config.h); what the runtime cannot
// train yet (head_dim != hidden / heads, QK-norm, MLA, sliding windows, ...: ModelSpec's
// beyond_family) is refused by name, never dropped. The files' tensors are checked against the
// mapping export writes (hf_names.h: the same pieces read the other way): every missing, extra or
// mis-shaped tensor is named, all together, before anything is written. The checkpoint is the
// format every reader takes (logical tensors, checkpoint.h): `train --init-from` in any layout
// reads only each rank's slices; `generate` and `export` read it whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/model_spec.h"
#include "runtime/checkpoint/hf_names.h"

namespace trident::checkpoint {

struct ImportSummary {
  ModelSpec model;
  HfClass cls = HfClass::Llama;
  int64_t hf_tensors = 0, values = 0, files = 0;
  std::string dtypes;     // "F32", "BF16 + F32"
  std::string tokenizer;  // what the checkpoint's tokenizer is, for the summary line
};

// Imports `hf_dir` into the new checkpoint `out` (which must not exist). seq_len: the training
// length (a Llama-family model's rotary embeddings take any; GPT-2's learned positions hold
// n_positions rows, so it must equal that). Throws InputError listing every problem.
ImportSummary import_hf(const std::string& hf_dir, const std::string& out, std::optional<int64_t> seq_len);

}  // namespace trident::checkpoint
