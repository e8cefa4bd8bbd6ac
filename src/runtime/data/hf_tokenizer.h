// Hugging Face's byte-level BPE, read from a tokenizer.json (GPT-2, Llama 3, Qwen2 style), exact
// to the ids of Hugging Face's `tokenizer.encode(text, add_special_tokens=False)`:
//   1. added tokens (special or not) are cut out of the text first, leftmost-longest;
//   2. each other span is pre-tokenized: the Split regex of the file (Isolated: matches and the
//      text between them are pieces) or ByteLevel's own GPT-2 regex (use_regex), through PCRE2
//      with Unicode classes (\p{L}, \p{N}, \s);
//   3. each piece's UTF-8 bytes become GPT-2's byte-to-unicode characters, and BPE merges the
//      pair of lowest rank (the leftmost of equals) until none applies; with ignore_merges a
//      piece that is a whole vocabulary entry is that entry (Llama 3).
// What changes ids and is not read is refused by name when the file is read (another model type,
// a normalizer, add_prefix_space, byte_fallback, a subword prefix, lstrip/rstrip/single_word
// added tokens, another Split behaviour): never dropped. The post-processor (a BOS a template
// adds) is not applied: the ids are add_special_tokens=False's. The file's text is kept whole so
// a checkpoint stores it and export writes it back byte for byte.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace trident::data {

class HfTokenizer {
 public:
  // Throws InputError listing every problem of the file (named by `origin`).
  static std::shared_ptr<const HfTokenizer> from_json(const std::string& text, const std::string& origin);
  ~HfTokenizer();

  const std::string& json_text() const { return text_; }
  int64_t vocab() const { return vocab_size_; }  // largest id + 1
  int64_t merges() const { return int64_t(ranks_.size()); }
  int64_t added() const { return int64_t(added_.size()); }
  // Throws InputError when the text is not UTF-8 (the tokenizer reads Unicode text).
  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // ids it does not know are skipped

 private:
  HfTokenizer() = default;
  static std::shared_ptr<const HfTokenizer> read(const std::string& text, const std::string& origin);
  void encode_span(const std::string& text, size_t begin, size_t end, std::vector<int32_t>& out,
                   std::unordered_map<std::string, std::vector<int32_t>>& cache) const;
  void encode_piece(const std::string& piece, std::vector<int32_t>& out) const;

  std::string text_;
  int64_t vocab_size_ = 0;
  std::unordered_map<std::string, int32_t> vocab_;        // byte-level strings -> id
  std::vector<std::string> bytes_of_;                      // id -> the bytes it spells ("" unknown)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> ranks_;  // pair -> (rank, merged id)
  std::vector<std::pair<std::string, int32_t>> added_;    // content -> id, longest first
  bool ignore_merges_ = false;
  std::vector<void*> splits_;                              // compiled pcre2 patterns, in order
  void* match_context_ = nullptr;
};

// GPT-2's byte-to-unicode map: byte b -> the UTF-8 of its printable stand-in character.
const std::vector<std::string>& byte_level_chars();

}  // namespace trident::data
