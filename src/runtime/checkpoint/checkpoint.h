// Checkpoints: a directory that any layout can read, whatever layout wrote it.
//
//   DIR/manifest.json     {"format": "trident-checkpoint", "version": 2,
//                          "meta": {model, step, seed, run settings, data, tokenizer, ...},
//                          "files": {"shard-00003.bin": {"bytes": N, "crc32c": "hex"}, ...},
//                          "tensors": {"layers.0.qkv_w": {"shape": [3C, C], "dtype": "f32",
//                                      "slices": [{"file", "offset" (bytes), "start": [row, col],
//                                                  "extent": [rows, cols], "crc32c"}, ...]}, ...}}
//   DIR/shard-RRRRR.bin   the slices rank R wrote, f32 little-endian, each slice row-major.
//
// Every tensor is stored by its logical name with its unsharded, unpadded shape (parameters by
// their model names; AdamW moments as "optimizer.m.NAME" and "optimizer.v.NAME"), so a run with
// other dp / tp / pp / ZeRO / schedule / virtual stages, or one process, reads the same file.
// Writing (Megatron's sharded tensors and torchtitan's DCP are the models): every writing rank
// fills its own shard file in a temporary directory (DIR.saving), rank 0 merges the shard
// indexes into the manifest and swaps the directory into place atomically (renameat2
// RENAME_EXCHANGE), so a crash mid-save leaves the previous checkpoint whole and loadable.
// Checksums are CRC-32C (checksum.h), computed once as each slice streams to its file; older
// checkpoints carry FNV-1a 64 ("fnv1a64" in place of "crc32c"), which the reader still checks.
// DIR.saving holds a marker file (.trident-save, kept in the saved checkpoint): a save removes
// only a DIR.saving with it, never a user's folder or file of that name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/problems.h"

namespace trident::checkpoint {

constexpr int kVersion = 2;

// Where rank writers put their files before the swap.
std::string temporary_dir(const std::string& dir);

// Creates the temporary directory for a save to `dir`, with the marker that says a save made it
// (removing a stale one a crashed save left: only one with the marker). Throws InputError when
// it cannot, or when a DIR.saving without the marker (not a save's) is in the way.
void begin_save(const std::string& dir);
// A problem when DIR.saving exists but no save made it (a user's folder or file of that name):
// the run check refuses the run before any work.
void check_temporary_dir(const std::string& dir, Problems& problems);
// After a failed save (a full disk): removes the save's partial temporary directory, if it is one.
void abandon_save(const std::string& dir);

class ShardFile;

// One rank's shard file in temporary_dir(dir), written as the slices come (no copy of the shard
// in memory; O_DIRECT where the file system takes it: shard_file.h). Every I/O error throws
// InputError.
class ShardWriter {
 public:
  ShardWriter(const std::string& dir, int rank);  // creates the file
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  // `data`: host memory, rows x cols of the logical tensor `name` (shape logical_rows x
  // logical_cols; logical_cols 1 for a vector) starting at [row, col]. Written to the file now.
  void add(const std::string& name, int64_t logical_rows, int64_t logical_cols, int64_t row, int64_t col,
           int64_t rows, int64_t cols, const float* data);
  // Syncs the shard file to disk and writes its index.
  void finish();

 private:
  [[noreturn]] void failed_writing() const;
  std::string dir_, file_;
  std::unique_ptr<ShardFile> out_;
  int64_t bytes_ = 0;     // written so far
  uint32_t crc_ = 0;      // CRC-32C of them
  nlohmann::json index_ = nlohmann::json::array();
};

// Rank 0, after every ShardWriter finished: merges the indexes into manifest.json (checking
// that every tensor is covered exactly), then swaps the temporary directory into `dir`.
void finish_save(const std::string& dir, const nlohmann::json& meta);

// True when `path` holds a Trident checkpoint directory (a manifest) — a save may replace it.
bool is_checkpoint(const std::string& path);

// THE reader: logical tensors by name, from any checkpoint whatever layout wrote it
// (`trident generate`, resume, export). Opening reads and checks the manifest (the slices cover
// every tensor exactly once). A rank reads only its part: read_block() touches just the stored
// slices that overlap the block it asks for, each checked against its own checksum (checkpoints
// written before slices had one: the whole file's, the first time it is read). tensor() is the
// whole tensor as one block. Every failure is an InputError naming the file.
class CheckpointReader {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;  // [rows] for vectors, [rows, cols] for matrices
    std::string dtype;           // "f32"
    std::vector<float> data;     // row-major, shape's product elements
    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
    int64_t cols() const { return shape.size() > 1 ? shape[1] : 1; }
  };

  explicit CheckpointReader(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const nlohmann::json& meta() const { return manifest_["meta"]; }
  std::vector<std::string> names() const;  // every tensor, parameters and optimizer moments
  bool has(const std::string& name) const { return manifest_["tensors"].contains(name); }
  Tensor tensor(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;  // [rows] or [rows, cols]
  // Rows [row, row + rows) x columns [col, col + cols) of `name` into `out` (row stride `stride`).
  void read_block(const std::string& name, int64_t row, int64_t col, int64_t rows, int64_t cols, float* out,
                  int64_t stride) const;

 private:
  void verify_file(const std::string& file) const;
  std::string dir_;
  nlohmann::json manifest_;
  mutable std::set<std::string> verified_;
};

}  // namespace trident::checkpoint
