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

}  // namespace trident::checkpoint
