// Tokenizers: byte-level (vocabulary 256, nothing to train) and byte-pair encoding trained on
// the corpus (GPT-2 style: text is cut into words that keep their leading space, merges never
// cross a word boundary). Token ids of a BPE: 0-255 the bytes, 256+i the i-th merge. Or a
// Hugging Face byte-level BPE read from a tokenizer.json (hf_tokenizer.h: its own ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/hf_tokenizer.h"

namespace trident::data {

enum class TokenizerKind : uint32_t { Bytes = 0, Bpe = 1, HfBpe = 2 };

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
  // A tokenizer.json's byte-level BPE (throws InputError naming `origin` and every problem).
  static Tokenizer from_hf_json(const std::string& text, const std::string& origin);

  TokenizerKind kind() const {
    return hf_ ? TokenizerKind::HfBpe : merges_.empty() ? TokenizerKind::Bytes : TokenizerKind::Bpe;
  }
  int64_t vocab() const { return hf_ ? hf_->vocab() : 256 + int64_t(merges_.size()); }
  const HfTokenizer* hf() const { return hf_.get(); }  // the tokenizer.json one, or null
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& tokens) const;
  const std::string& token_bytes(int32_t id) const { return pieces_[size_t(id)]; }  // Bytes and Bpe

  // Text file: "trident-tokenizer 1 KIND", then one merge "a b" per line; a Hugging Face one is
  // its tokenizer.json as it was read. Throws InputError.
  void save(const std::string& path) const;
  static Tokenizer load(const std::string& path);

 private:
  void build_pieces();
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> pieces_;
  std::shared_ptr<const HfTokenizer> hf_;
};

// Cuts text into GPT-2-like words: a run of letters/digits or of other non-space bytes, with
// the single space that precedes it; other whitespace runs stand alone.
std::vector<std::string> split_words(const std::string& text);

}  // namespace trident::data
