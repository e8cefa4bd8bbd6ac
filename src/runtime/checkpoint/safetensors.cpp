#include "runtime/checkpoint/safetensors.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/problems.h"

namespace trident::checkpoint {

std::string safetensors_bytes(const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian values");
  Problems p;
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (n != int64_t(t.data.size()))
      p.add(fmt::format("tensor {} has {} values for a shape of {}", t.name, t.data.size(), n), "report this as a bug");
    if (header.contains(t.name)) p.add("tensor " + t.name + " appears twice", "report this as a bug");
    const uint64_t bytes = uint64_t(t.data.size()) * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  p.throw_if_any();
  // nlohmann orders keys alphabetically; the data must follow the offsets given above, which
  // follow `tensors`, so every entry carries its own offsets and order does not matter.
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  const uint64_t n = h.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += h;
  for (const auto& t : tensors) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  return out;
}

}  // namespace trident::checkpoint
