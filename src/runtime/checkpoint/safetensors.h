// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}
// padded with spaces to 8 bytes, then the tensors' bytes back to back in header order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trident::checkpoint {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, product(shape) elements
};

// The whole file's bytes. Throws InputError when two tensors share a name or a shape does not
// match its data.
std::string safetensors_bytes(const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata);

// One tensor of a file's header: its bytes are [begin, end) of the data after the header.
struct SafetensorsEntry {
  std::string dtype;  // "F32", "F16" or "BF16" (the ones the reader converts)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// A safetensors file opened for reading (trident import). Opening reads and checks the whole
// header against the file's size: its length, the JSON, each tensor's dtype (F32, F16, BF16),
// shape and offsets (inside the data, no two overlapping, end - begin = elements x dtype size,
// every product overflow-checked); every problem of the header is listed together in one
// InputError naming the file and the tensor. Tensors are then read one at a time (pread), so a
// sharded checkpoint is never in memory whole.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&& o) noexcept;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
  // The tensor's values as f32 (F16 and BF16 widened exactly). Throws InputError on a read error.
  std::vector<float> read(const std::string& name) const;

  static constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;  // the safetensors library's own limit

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> tensors_;
};

// Bytes per element of a dtype the reader converts; 0 for any other.
int safetensors_dtype_bytes(const std::string& dtype);

}  // namespace trident::checkpoint
