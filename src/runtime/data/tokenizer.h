// Tokenizers: byte-level (vocabulary 256, nothing to train) and byte-pair encoding trained on
// the corpus (GPT-2 style: text is cut into words that keep their leading space, merges never
// cross a word boundary). Token ids of a BPE: 0-255 the bytes, 256+i the i-th merge.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trident::data {

enum class TokenizerKind : uint32_t { Bytes = 0, Bpe = 1 };

class Tokenizer {
 public:
  static Tokenizer bytes();
  // Learns vocab - 256 merges from the text (vocab > 256). Meant for vocabularies up to a few
  // thousand on a few MB of text (seconds).
  static Tokenizer train_bpe(const std::string& text, int64_t vocab);
  // Merge i joins two earlier tokens (ids below 256 + i). A list that breaks that, or whose
  // tokens would spell more than kMaxTokenBytes in all, is an InputError naming `origin`.
  static Tokenizer from_merges(std::vector<std::pair<int32_t, int32_t>> merges,
                               const std::string& origin = "the tokenizer");
  static constexpr int64_t kMaxTokenBytes = int64_t(64) << 20;

  TokenizerKind kind() const { return merges_.empty() ? TokenizerKind::Bytes : TokenizerKind::Bpe; }
  int64_t vocab() const { return 256 + int64_t(merges_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& tokens) const;
  const std::string& token_bytes(int32_t id) const { return pieces_[size_t(id)]; }

  // Text file: "trident-tokenizer 1 KIND", then one merge "a b" per line. Throws InputError.
  void save(const std::string& path) const;
  static Tokenizer load(const std::string& path);

 private:
  void build_pieces();
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> pieces_;
};

// Cuts text into GPT-2-like words: a run of letters/digits or of other non-space bytes, with
// the single space that precedes it; other whitespace runs stand alone.
std::vector<std::string> split_words(const std::string& text);

}  // namespace trident::data
