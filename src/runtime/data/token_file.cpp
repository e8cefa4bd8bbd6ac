// Token file writer and memory-mapped reader (format in token_file.h).
#include "runtime/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/output_path.h"
#include "core/problems.h"

namespace trident::data {

namespace {
constexpr char kMagic[8] = {'T', 'R', 'D', 'T', 'O', 'K', 'E', 'N'};

[[noreturn]] void fail(const std::string& what, const std::string& fix, const std::string& code) {
  Problems p;
  p.add(what, fix, code);
  p.throw_if_any();
  throw std::logic_error("unreachable");
}
}  // namespace

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab,
                      uint32_t tokenizer_kind) {
  const uint32_t width = vocab <= 65536 ? 2 : 4;
  unsigned char header[kTokenHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  const uint32_t version = kTokenFileVersion, v32 = uint32_t(vocab);
  const uint64_t count = tokens.size();
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &v32, 4);
  std::memcpy(header + 16, &count, 8);
  std::memcpy(header + 24, &width, 4);
  std::memcpy(header + 28, &tokenizer_kind, 4);
  // The one atomic writer (a temp name per process and call, then rename): ranks of one job
  // preparing the same file at once each write a whole file, and readers only ever see a complete one.
  write_file_atomically(path, [&](std::FILE* f) {
    bool ok = std::fwrite(header, 1, sizeof header, f) == sizeof header;
    if (width == 2) {
      std::vector<uint16_t> w(tokens.begin(), tokens.end());
      ok = ok && std::fwrite(w.data(), 2, w.size(), f) == w.size();
    } else {
      ok = ok && std::fwrite(tokens.data(), 4, tokens.size(), f) == tokens.size();
    }
    return ok;
  });
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  const std::string fix_prepare = "create it with `trident data prepare TEXT " + path + "`";
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open token file '" + path + "': " + std::strerror(errno), fix_prepare, "token-file-open");
  struct stat st {};
  fstat(fd, &st);
  const size_t bytes = size_t(st.st_size);
  unsigned char header[kTokenHeaderBytes] = {};
  if (bytes < size_t(kTokenHeaderBytes) || ::pread(fd, header, sizeof header, 0) != ssize_t(sizeof header)) {
    ::close(fd);
    fail("token file '" + path + "' is " + std::to_string(bytes) + " bytes, shorter than its 64-byte header",
         fix_prepare, "token-file-size");
  }
  uint32_t version = 0, vocab = 0, width = 0, kind = 0;
  uint64_t count = 0;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&vocab, header + 12, 4);
  std::memcpy(&count, header + 16, 8);
  std::memcpy(&width, header + 24, 4);
  std::memcpy(&kind, header + 28, 4);
  Problems p;
  if (std::memcmp(header, kMagic, 8) != 0) {
    p.add("'" + path + "' is not a Trident token file (bad magic number)", fix_prepare, "token-file-magic");
  } else {
    if (version != kTokenFileVersion)
      p.add("token file '" + path + "' has version " + std::to_string(version) + ", this Trident reads version " +
                std::to_string(kTokenFileVersion),
            "prepare the file again with this Trident: " + fix_prepare, "token-file-version");
    if (width != 2 && width != 4)
      p.add("token file '" + path + "' says tokens are " + std::to_string(width) + " bytes (must be 2 or 4)",
            fix_prepare, "token-file-width");
    else if (bytes != size_t(kTokenHeaderBytes) + count * width)
      p.add("token file '" + path + "' is " + std::to_string(bytes) + " bytes but its header promises " +
                std::to_string(count) + " tokens of " + std::to_string(width) + " bytes (" +
                std::to_string(kTokenHeaderBytes + count * width) + " bytes): truncated or corrupt",
            fix_prepare, "token-file-size");
    if (vocab == 0) p.add("token file '" + path + "' has vocabulary 0", fix_prepare, "token-file-vocab");
  }
  if (!p.empty()) {
    ::close(fd);
    p.throw_if_any();
  }
  map_bytes_ = bytes;
  map_ = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("cannot memory-map '" + path + "'", "check the file is readable", "token-file-open");
  }
  data_ = static_cast<const unsigned char*>(map_) + kTokenHeaderBytes;
  count_ = int64_t(count);
  vocab_ = vocab;
  width_ = width;
  kind_ = kind;
}

TokenFile::~TokenFile() {
  if (map_) munmap(map_, map_bytes_);
}

void TokenFile::read(int64_t begin, int64_t n, int32_t* out) const {
  for (int64_t i = 0; i < n; ++i) out[i] = at(begin + i);
}

uint64_t fnv1a64(const unsigned char* bytes, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

uint64_t TokenFile::payload_checksum() const { return fnv1a64(data_, size_t(count_) * width_); }

}  // namespace trident::data
