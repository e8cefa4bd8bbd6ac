// Token files: what `trident data prepare` writes and training memory-maps.
//
// Layout (little-endian): a 64-byte header, then token_count tokens of token_bytes each.
//   0  char[8]  magic "TRDTOKEN"
//   8  u32      version (2; version 1 files, without the checksum, are still read)
//  12  u32      vocab (every token id is < vocab)
//  16  u64      token_count
//  24  u32      token_bytes (2 or 4)
//  28  u32      tokenizer kind (0 = bytes, 1 = BPE; its merges are in FILE.tokenizer)
//  32  u64      version 2: FNV-1a 64 of the token bytes (fnv1a64 below); version 1: zero
//  40  u8[24]   reserved (zero)
// The reader checks the magic, the version, the token width, that the file size is exactly
// 64 + token_count * token_bytes, the checksum (version 2), and that every token id is below
// the vocabulary; every mismatch is an InputError naming the file and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/tokenizer.h"

namespace trident::data {

constexpr uint32_t kTokenFileVersion = 2;  // the version written; 1 and 2 are read
constexpr int64_t kTokenHeaderBytes = 64;

// Writes the file atomically (to FILE.tmp, then renamed): a failure never leaves half a file.
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab,
                      uint32_t tokenizer_kind);

// FNV-1a, 64 bits (offset basis 14695981039346656037, prime 1099511628211), of `bytes`.
uint64_t fnv1a64(const unsigned char* bytes, size_t n);

// A read-only memory map of a token file.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);  // throws InputError on any header problem
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  int64_t vocab() const { return vocab_; }
  uint32_t tokenizer_kind() const { return kind_; }
  uint32_t version() const { return version_; }  // 1: an old file, its tokens without a checksum
  int32_t largest_token() const { return largest_; }
  int32_t at(int64_t i) const { return width_ == 2 ? reinterpret_cast<const uint16_t*>(data_)[i]
                                                   : static_cast<int32_t>(reinterpret_cast<const uint32_t*>(data_)[i]); }
  // Copies tokens [begin, begin+n) as int32.
  void read(int64_t begin, int64_t n, int32_t* out) const;
  // FNV-1a 64 of the token bytes after the header (verified against the header's in version 2):
  // the file's identity, whatever its name.
  uint64_t payload_checksum() const { return checksum_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* data_ = nullptr;
  int64_t count_ = 0, vocab_ = 0;
  uint32_t width_ = 2, kind_ = 0, version_ = 0;
  uint64_t checksum_ = 0;
  int32_t largest_ = 0;
};

// The tokenizer that decodes a token file: bytes, or the BPE merges in FILE.tokenizer, which
// must exist and cover every token id of the file (a missing or truncated tokenizer would
// decode the text wrongly). Throws InputError naming both files.
Tokenizer tokenizer_of(const TokenFile& file);

}  // namespace trident::data
