// Checkpoints: a versioned file holding a run's weights, AdamW moments and everything needed
// to continue it bit for bit (step, seed, schedule, data, tokenizer).
//
// Layout (little-endian):
//   char[8] "TRDCKPT\0" | u32 version (1) | u32 meta_bytes | meta (JSON text) |
//   f32 params[n] | f32 m[n] | f32 v[n] | u64 FNV-1a hash of every byte before it
// n = meta["param_count"]. The reader checks magic, version, exact size and the hash, so a
// truncated or corrupted file is refused with a clear error; the writer writes FILE.tmp and
// renames it, so a failed save never damages an existing checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident::checkpoint {

constexpr uint32_t kVersion = 1;

struct Checkpoint {
  nlohmann::json meta;  // model, step, seed, optimizer, data, tokenizer ...
  std::vector<float> params, m, v;
};

void save(const std::string& path, const Checkpoint& c);
// Throws InputError (magic, version, size, hash, meta) naming the file.
Checkpoint load(const std::string& path);

}  // namespace trident::checkpoint
