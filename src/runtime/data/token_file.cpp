// Token file writer and memory-mapped reader (format in token_file.h).
#include "runtime/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/checked_size.h"
#include "core/input_file.h"
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
  std::vector<uint16_t> narrow;
  if (width == 2) narrow.assign(tokens.begin(), tokens.end());
  const unsigned char* body = width == 2 ? reinterpret_cast<const unsigned char*>(narrow.data())
                                         : reinterpret_cast<const unsigned char*>(tokens.data());
  const uint64_t checksum = fnv1a64(body, tokens.size() * width);
  std::memcpy(header + 32, &checksum, 8);
  // The one atomic writer (a temp name per process and call, then rename): ranks of one job
  // preparing the same file at once each write a whole file, and readers only ever see a complete one.
  write_file_atomically(path, [&](std::FILE* f) {
    return std::fwrite(header, 1, sizeof header, f) == sizeof header &&
           std::fwrite(body, width, tokens.size(), f) == tokens.size();
  });
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  const std::string fix_prepare = "create it with `trident data prepare TEXT " + path + "`";
  {
    // A token file is memory-mapped and exactly sized: a FIFO (whose open would block for ever),
    // a device or a directory can never be one. Any size: it is mapped, not read into memory.
    Problems p;
    check_input_file({path, "token file", "--data", "token-file-open"}, std::numeric_limits<uint64_t>::max(), p);
    p.throw_if_any();
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  uint64_t count = 0, stored_checksum = 0;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&vocab, header + 12, 4);
  std::memcpy(&count, header + 16, 8);
  std::memcpy(&width, header + 24, 4);
  std::memcpy(&kind, header + 28, 4);
  std::memcpy(&stored_checksum, header + 32, 8);
  Problems p;
  if (std::memcmp(header, kMagic, 8) != 0) {
    p.add("'" + path + "' is not a Trident token file (bad magic number)", fix_prepare, "token-file-magic");
  } else {
    if (version != 1 && version != kTokenFileVersion)
      p.add("token file '" + path + "' has version " + std::to_string(version) + ", this Trident reads versions 1 and " +
                std::to_string(kTokenFileVersion),
            "prepare the file again with this Trident: " + fix_prepare, "token-file-version");
    // The header's count times the width, checked: a count near 2^62 times 4 wraps to a small size.
    const CheckedCount expected =
        CheckedCount(kTokenHeaderBytes) + (count < (uint64_t(1) << 62) ? CheckedCount(int64_t(count)) * int64_t(width)
                                                                         : CheckedCount(kMaxCount) * 2);
    if (width != 2 && width != 4)
      p.add("token file '" + path + "' says tokens are " + std::to_string(width) + " bytes (must be 2 or 4)",
            fix_prepare, "token-file-width");
    else if (!expected.ok() || uint64_t(expected.value_or(0)) != bytes)
      p.add("token file '" + path + "' is " + std::to_string(bytes) + " bytes but its header promises " +
                std::to_string(count) + " tokens of " + std::to_string(width) + " bytes (" +
                (expected.ok() ? std::to_string(expected.value_or(0)) : "more than 2^62") +
                " bytes with the header): truncated or corrupt",
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
  version_ = version;
  // One pass over the tokens: their checksum and their largest id. A flipped byte or an id the
  // embedding has no row for is an error here, not a wrong loss or a read out of bounds later.
  checksum_ = fnv1a64(data_, size_t(count_) * width_);
  uint32_t largest = 0;
  int64_t first_outside = -1;
  for (int64_t i = 0; i < count_; ++i) {
    const uint32_t t = width_ == 2 ? reinterpret_cast<const uint16_t*>(data_)[i] : reinterpret_cast<const uint32_t*>(data_)[i];
    largest = std::max(largest, t);
    if (t >= vocab && first_outside < 0) first_outside = i;
  }
  largest_ = int32_t(std::min<uint32_t>(largest, std::numeric_limits<int32_t>::max()));
  if (version_ >= 2 && checksum_ != stored_checksum)
    p.add(fmt::format("token file '{}' is corrupt: its tokens hash to {:#018x} (FNV-1a 64) but its header says {:#018x}",
                      path, checksum_, stored_checksum),
          fix_prepare, "token-file-checksum");
  else if (first_outside >= 0)
    p.add(fmt::format("token file '{}' holds token id {} at position {}, outside its vocabulary of {}: corrupt", path,
                      width_ == 2 ? reinterpret_cast<const uint16_t*>(data_)[first_outside]
                                  : reinterpret_cast<const uint32_t*>(data_)[first_outside],
                      first_outside, vocab),
          fix_prepare, "token-file-range");
  if (!p.empty()) {  // a constructor that throws runs no destructor: unmap here
    munmap(map_, map_bytes_);
    map_ = nullptr;
  }
  p.throw_if_any();
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


Tokenizer tokenizer_of(const TokenFile& file) {
  const uint32_t kind = file.tokenizer_kind();
  if (kind != uint32_t(TokenizerKind::Bpe) && kind != uint32_t(TokenizerKind::HfBpe)) return Tokenizer::bytes();
  const std::string path = file.path() + ".tokenizer";
  const std::string fix = "keep the .tokenizer file that `trident data prepare` wrote beside the token file, or prepare "
                          "it again";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail("token file '" + file.path() + "' holds BPE tokens but its tokenizer '" + path + "' is missing", fix,
         "tokenizer-missing");
  Tokenizer t = Tokenizer::load(path);
  if (uint32_t(t.kind()) != kind)
    fail(fmt::format("token file '{}' says its tokens are {} ids but '{}' is {}", file.path(),
                     kind == uint32_t(TokenizerKind::HfBpe) ? "tokenizer.json" : "Trident BPE", path,
                     t.hf() ? "a tokenizer.json" : "a Trident BPE tokenizer"),
         fix, "tokenizer-kind");
  if (file.largest_token() >= t.vocab())
    fail(fmt::format("tokenizer '{}' knows {} tokens ({}) but '{}' holds token id {}: the tokenizer "
                     "is truncated or belongs to other data",
                     path, t.vocab(),
                     t.hf() ? fmt::format("a tokenizer.json of {} merges", t.hf()->merges())
                            : fmt::format("256 bytes + {} merges", t.merges().size()),
                     file.path(), file.largest_token()),
         fix, "tokenizer-truncated");
  return t;
}

}  // namespace trident::data
