// Checkpoint writer and checked reader (see checkpoint.h).
#include "runtime/checkpoint/checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/problems.h"

namespace trident::checkpoint {

namespace {
constexpr char kMagic[8] = {'T', 'R', 'D', 'C', 'K', 'P', 'T', '\0'};

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
};

[[noreturn]] void fail(const std::string& what, const std::string& fix, const std::string& code) {
  Problems p;
  p.add(what, fix, code);
  p.throw_if_any();
  throw std::logic_error("unreachable");
}
}  // namespace

void save(const std::string& path, const Checkpoint& c) {
  const std::string meta = c.meta.dump();
  const uint32_t version = kVersion, meta_bytes = uint32_t(meta.size());
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot write checkpoint '" + tmp + "': " + std::strerror(errno), "check the folder exists and is writable", "io");
  Fnv h;
  bool ok = true;
  auto put = [&](const void* p, size_t n) {
    h.add(p, n);
    ok = ok && std::fwrite(p, 1, n, f) == n;
  };
  put(kMagic, 8);
  put(&version, 4);
  put(&meta_bytes, 4);
  put(meta.data(), meta.size());
  put(c.params.data(), c.params.size() * 4);
  put(c.m.data(), c.m.size() * 4);
  put(c.v.data(), c.v.size() * 4);
  ok = ok && std::fwrite(&h.h, 8, 1, f) == 1;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("failed writing checkpoint '" + path + "' (the previous file, if any, is untouched)", "check free disk space", "io");
  }
}

Checkpoint load(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) fail("cannot open checkpoint '" + path + "'", "check the path (written by `trident train --checkpoint FILE`)", "checkpoint-open");
  const int64_t size = f.tellg();
  f.seekg(0);
  std::vector<char> bytes(static_cast<size_t>(size));
  f.read(bytes.data(), size);
  const std::string redo = "use an intact checkpoint, or train again with --checkpoint";
  if (size < 16 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    fail("'" + path + "' is not a Trident checkpoint (bad magic number)", redo, "checkpoint-magic");
  uint32_t version = 0, meta_bytes = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&meta_bytes, bytes.data() + 12, 4);
  if (version != kVersion)
    fail("checkpoint '" + path + "' has version " + std::to_string(version) + ", this Trident reads version " +
             std::to_string(kVersion), redo, "checkpoint-version");
  if (int64_t(16) + meta_bytes + 8 > size)
    fail("checkpoint '" + path + "' is truncated (" + std::to_string(size) + " bytes)", redo, "checkpoint-size");
  Checkpoint c;
  try {
    c.meta = nlohmann::json::parse(std::string(bytes.data() + 16, meta_bytes));
  } catch (const std::exception&) {
    fail("checkpoint '" + path + "' has an unreadable header", redo, "checkpoint-meta");
  }
  const int64_t n = c.meta.value("param_count", int64_t(-1));
  const int64_t expect = 16 + int64_t(meta_bytes) + 3 * 4 * n + 8;
  if (n < 0 || size != expect)
    fail("checkpoint '" + path + "' is " + std::to_string(size) + " bytes, expected " + std::to_string(expect) +
             " for " + std::to_string(n) + " parameters: truncated or corrupt", redo, "checkpoint-size");
  Fnv h;
  h.add(bytes.data(), size_t(size - 8));
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + size - 8, 8);
  if (stored != h.h) fail("checkpoint '" + path + "' is corrupt (checksum mismatch)", redo, "checkpoint-hash");
  const char* p = bytes.data() + 16 + meta_bytes;
  for (auto* vec : {&c.params, &c.m, &c.v}) {
    vec->resize(size_t(n));
    std::memcpy(vec->data(), p, size_t(n) * 4);
    p += n * 4;
  }
  return c;
}

}  // namespace trident::checkpoint
