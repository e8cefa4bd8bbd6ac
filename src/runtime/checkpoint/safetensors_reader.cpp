// Reading safetensors files (see safetensors.h): the header checked whole before any tensor.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/problems.h"
#include "runtime/checkpoint/safetensors.h"

namespace trident::checkpoint {
namespace {

const char* const kFix = "give the safetensors files transformers wrote (save_pretrained), whole";

float half_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);                                 // zero or subnormal
  else if (exp == 31) v = mant ? std::nanf("") : INFINITY;
  else v = std::ldexp(float(mant + 1024), exp - 25);
  return sign ? -v : v;
}

[[noreturn]] void fail(const std::string& what, const std::string& code = "safetensors-file") {
  throw InputError({{what, kFix, code}});
}

}  // namespace

int safetensors_dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), data_start_(o.data_start_), tensors_(std::move(o.tensors_)) {
  o.fd_ = -1;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian values");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open safetensors file '" + path + "': " + std::strerror(errno), "safetensors-open");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) fail("'" + path + "' is not a regular file", "safetensors-open");
  const uint64_t size = uint64_t(st.st_size);
  uint64_t n = 0;
  if (size < 8 || ::pread(fd_, &n, 8, 0) != 8) fail(fmt::format("safetensors file '{}' is {} bytes, too short for its 8-byte header length", path, size));
  if (n == 0 || n > kMaxHeaderBytes || n > size - 8)
    fail(fmt::format("safetensors file '{}' gives a header of {} bytes in a file of {} (at most {} and the file's size - 8)",
                     path, n, size, kMaxHeaderBytes));
  std::string text(size_t(n), '\0');
  if (::pread(fd_, text.data(), size_t(n), 8) != ssize_t(n)) fail("cannot read the header of '" + path + "'");
  data_start_ = 8 + n;
  const uint64_t data_bytes = size - data_start_;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    fail("the header of safetensors file '" + path + "' is not JSON");
  }
  if (!header.is_object()) fail("the header of safetensors file '" + path + "' is not a JSON object");
  Problems p;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = fmt::format("tensor '{}' of '{}'", name, path);
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
      p.add(where + " has no dtype, shape and data_offsets [begin, end]", kFix, "safetensors-header");
      continue;
    }
    SafetensorsEntry t;
    t.dtype = e["dtype"].get<std::string>();
    const int bytes = safetensors_dtype_bytes(t.dtype);
    if (bytes == 0) p.add(where + " has dtype " + t.dtype + "; import reads F32, F16 and BF16 weights", kFix, "safetensors-dtype");
    // Elements x bytes, each step checked: a shape of huge dimensions never wraps.
    unsigned __int128 count = 1;
    bool shape_ok = true;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 62)) { shape_ok = false; break; }
      t.shape.push_back(int64_t(d.get<uint64_t>()));
      count *= d.get<uint64_t>();
      if (count > (unsigned __int128)(uint64_t(1) << 62)) { shape_ok = false; break; }
    }
    const auto& o = e["data_offsets"];
    if (!shape_ok) p.add(where + " has shape " + e["shape"].dump().substr(0, 80) + " (not whole numbers, or over 2^62 elements)", kFix, "safetensors-header");
    if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned()) {
      p.add(where + " has data_offsets " + o.dump().substr(0, 80) + ", not whole numbers", kFix, "safetensors-header");
      continue;
    }
    t.begin = o[0].get<uint64_t>(), t.end = o[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_bytes) {
      p.add(fmt::format("{} has data_offsets [{}, {}] outside the file's {} bytes of data", where, t.begin, t.end, data_bytes),
            kFix, "safetensors-offsets");
      continue;
    }
    if (shape_ok && bytes > 0 && count * unsigned(bytes) != t.end - t.begin)
      p.add(fmt::format("{} holds {} bytes for a shape {} of {} ({} elements x {} bytes)", where, t.end - t.begin,
                        e["shape"].dump(), t.dtype, uint64_t(count), bytes),
            kFix, "safetensors-offsets");
    ranges.push_back({t.begin, t.end});
    tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) {
      p.add(fmt::format("safetensors file '{}' has tensors whose bytes overlap ([{}, {}) and [{}, {}))", path,
                        ranges[i - 1].first, ranges[i - 1].second, ranges[i].first, ranges[i].second),
            kFix, "safetensors-offsets");
      break;
    }
  p.throw_if_any();
}

std::vector<float> SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry& t = tensors_.at(name);
  const uint64_t bytes = t.end - t.begin;
  std::string raw(size_t(bytes), '\0');
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd_, raw.data() + done, size_t(bytes - done), off_t(data_start_ + t.begin + done));
    if (got <= 0) fail("cannot read tensor '" + name + "' of '" + path_ + "': " + (got < 0 ? std::strerror(errno) : "the file ended"));
    done += uint64_t(got);
  }
  const int width = safetensors_dtype_bytes(t.dtype);
  std::vector<float> out(size_t(bytes / uint64_t(width)));
  if (t.dtype == "F32") {
    std::memcpy(out.data(), raw.data(), size_t(bytes));
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      if (t.dtype == "BF16") out[i] = std::bit_cast<float>(uint32_t(h) << 16);  // bf16 is f32's top half
      else out[i] = half_to_float(h);
    }
  }
  return out;
}

}  // namespace trident::checkpoint
