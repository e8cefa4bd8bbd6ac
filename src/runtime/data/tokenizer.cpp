// Byte-level and BPE tokenizers (see tokenizer.h).
#include "runtime/data/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <unordered_map>

#include "core/hf_config.h"
#include "core/input_file.h"
#include "core/output_path.h"
#include "core/problems.h"

namespace trident::data {

namespace {
int byte_class(unsigned char c) {
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return 0;
  if (std::isalnum(c) || c >= 128) return 1;
  return 2;
}
const char* const kRewrite = "use the tokenizer `trident data prepare` wrote (or a checkpoint of `trident train`)";
uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0, n = text.size();
  while (i < n) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < n && byte_class(text[i + 1]) != 0) ++i;  // leading space joins the word
    const int cls = byte_class(text[i]);
    ++i;
    while (i < n && byte_class(text[i]) == cls && !(cls == 0 && text[i] == ' ' && i + 1 < n && byte_class(text[i + 1]) != 0))
      ++i;
    words.push_back(text.substr(start, i - start));
  }
  return words;
}

Tokenizer Tokenizer::bytes() {
  Tokenizer t;
  t.build_pieces();
  return t;
}

Tokenizer Tokenizer::from_merges(std::vector<std::pair<int32_t, int32_t>> merges, const std::string& origin) {
  // Each merge can double a token (a a, then 256 256, then 257 257, ...): forty lines of a
  // crafted file would spell a terabyte. A BPE never merges across a word, so the tokens of a
  // trained one add up to far less than the text it was trained on; count before building.
  std::vector<int64_t> length(256, 1);
  int64_t total = 256;
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [a, b] = merges[i];
    Problems p;
    if (a < 0 || b < 0 || int64_t(a) >= int64_t(length.size()) || int64_t(b) >= int64_t(length.size()))
      p.add(origin + " has a bad merge " + std::to_string(i) + " (" + std::to_string(a) + ", " + std::to_string(b) +
                "): a merge joins two earlier tokens",
            kRewrite, "tokenizer-file");
    else if ((total += length.emplace_back(length[size_t(a)] + length[size_t(b)])) > kMaxTokenBytes)
      p.add(origin + "'s merges spell tokens of more than " + std::to_string(kMaxTokenBytes >> 20) +
                " MiB in all (merge " + std::to_string(i) + " makes one of " + std::to_string(length.back()) +
                " bytes): not a tokenizer trained on text",
            kRewrite, "tokenizer-file");
    p.throw_if_any();
  }
  Tokenizer t;
  t.merges_ = std::move(merges);
  t.build_pieces();
  return t;
}

void Tokenizer::build_pieces() {
  pieces_.clear();
  for (int i = 0; i < 256; ++i) pieces_.push_back(std::string(1, char(i)));
  for (auto [a, b] : merges_) pieces_.push_back(pieces_[size_t(a)] + pieces_[size_t(b)]);
}

Tokenizer Tokenizer::train_bpe(const std::string& text, int64_t vocab) {
  // Unique words with their counts; each word a sequence of symbols.
  std::unordered_map<std::string, int64_t> counts;
  for (auto& w : split_words(text)) ++counts[w];
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
  for (auto& [w, c] : counts) {
    std::vector<int32_t> s(w.begin(), w.end());
    for (auto& x : s) x = int32_t(uint8_t(x));
    words.push_back(std::move(s));
    freq.push_back(c);
  }
  std::unordered_map<uint64_t, int64_t> pairs;
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].size(); ++i) pairs[pair_key(words[w][i], words[w][i + 1])] += freq[w];
  std::vector<std::pair<int32_t, int32_t>> merges;
  while (int64_t(256 + merges.size()) < vocab) {
    uint64_t best = 0;
    int64_t best_count = 0;
    for (auto& [k, c] : pairs)
      if (c > best_count || (c == best_count && c > 0 && k < best)) best = k, best_count = c;  // ties: smallest pair
    if (best_count < 2) break;
    const int32_t a = int32_t(best >> 32), b = int32_t(best & 0xffffffffu), id = int32_t(256 + merges.size());
    merges.push_back({a, b});
    for (size_t w = 0; w < words.size(); ++w) {
      auto& s = words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < s.size(); ++i)
        if (s[i] == a && s[i + 1] == b) { has = true; break; }
      if (!has) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) pairs[pair_key(s[i], s[i + 1])] -= freq[w];
      std::vector<int32_t> out;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) out.push_back(id), ++i;
        else out.push_back(s[i]);
      }
      s = std::move(out);
      for (size_t i = 0; i + 1 < s.size(); ++i) pairs[pair_key(s[i], s[i + 1])] += freq[w];
    }
    pairs.erase(best);
  }
  return from_merges(std::move(merges));
}

Tokenizer Tokenizer::from_hf_json(const std::string& text, const std::string& origin) {
  Tokenizer t;
  t.hf_ = HfTokenizer::from_json(text, origin);
  return t;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  if (hf_) return hf_->encode(text);
  std::vector<int32_t> out;
  if (merges_.empty()) {
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  std::unordered_map<uint64_t, int32_t> rank;
  for (size_t i = 0; i < merges_.size(); ++i) rank[pair_key(merges_[i].first, merges_[i].second)] = int32_t(i);
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  for (auto& w : split_words(text)) {
    auto it = cache.find(w);
    if (it == cache.end()) {
      std::vector<int32_t> s;
      for (unsigned char c : w) s.push_back(c);
      while (s.size() > 1) {  // apply the lowest-ranked merge present, as in training
        int32_t best = -1;
        for (size_t i = 0; i + 1 < s.size(); ++i) {
          auto r = rank.find(pair_key(s[i], s[i + 1]));
          if (r != rank.end() && (best < 0 || r->second < best)) best = r->second;
        }
        if (best < 0) break;
        const auto [a, b] = merges_[size_t(best)];
        std::vector<int32_t> next;
        for (size_t i = 0; i < s.size(); ++i) {
          if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) next.push_back(256 + best), ++i;
          else next.push_back(s[i]);
        }
        s = std::move(next);
      }
      it = cache.emplace(w, std::move(s)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& tokens) const {
  if (hf_) return hf_->decode(tokens);
  std::string s;
  for (int32_t t : tokens)
    if (t >= 0 && t < int32_t(pieces_.size())) s += pieces_[size_t(t)];
  return s;
}

void Tokenizer::save(const std::string& path) const {
  if (hf_) {
    write_text_atomically(path, hf_->json_text());
    return;
  }
  std::ostringstream f;
  f << "trident-tokenizer 1 " << (kind() == TokenizerKind::Bpe ? "bpe" : "bytes") << "\n";
  for (auto [a, b] : merges_) f << a << ' ' << b << '\n';
  write_text_atomically(path, f.str());
}

Tokenizer Tokenizer::load(const std::string& path) {
  Problems p;
  // At most 65536 - 256 merges of two ids: well under 1 MiB; a tokenizer.json of 150k tokens and
  // merges (Qwen2's, Llama 3's) about 10 MiB; a device or a FIFO is refused unread.
  constexpr uint64_t kMaxTokenizerBytes = 64u << 20;
  const auto text = read_input_file({path, "tokenizer", "the token file's .tokenizer", "tokenizer-file"},
                                    kMaxTokenizerBytes, p);
  p.throw_if_any();
  if (looks_like_json(*text)) return from_hf_json(*text, "tokenizer '" + path + "'");
  std::istringstream f(*text);
  std::string magic, kind;
  int version = 0;
  if (!(f >> magic >> version >> kind) || magic != "trident-tokenizer" || version != 1) {
    p.add("'" + path + "' is not a Trident tokenizer file (version 1)", "prepare the data again with `trident data prepare`",
          "tokenizer-file");
    p.throw_if_any();
  }
  if (kind != "bpe" && kind != "bytes") {
    p.add("tokenizer '" + path + "' has kind '" + kind + "' (must be bpe or bytes)",
          "prepare the data again with `trident data prepare`", "tokenizer-file");
    p.throw_if_any();
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::string line;
  std::getline(f, line);  // the rest of the header line
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    // One merge per line, "a b": a line cut short or anything else is a damaged file.
    std::istringstream in(line);
    int32_t a = -1, b = -1;
    std::string rest;
    if (!(in >> a >> b) || (in >> rest)) {
      p.add("tokenizer '" + path + "' has an unreadable line after its " + std::to_string(merges.size()) +
                " merges: '" + line.substr(0, 40) + "'",
            "prepare the data again with `trident data prepare`", "tokenizer-file");
      p.throw_if_any();
    }
    const int32_t next = int32_t(256 + merges.size());
    if (a < 0 || b < 0 || a >= next || b >= next) {
      p.add("tokenizer '" + path + "' has a bad merge (" + std::to_string(a) + ", " + std::to_string(b) + ")",
            "prepare the data again", "tokenizer-file");
      p.throw_if_any();
    }
    merges.push_back({a, b});
  }
  if (kind == "bpe" && merges.empty()) {
    p.add("tokenizer '" + path + "' says bpe but holds no merges (truncated?)",
          "prepare the data again with `trident data prepare`", "tokenizer-file");
    p.throw_if_any();
  }
  return from_merges(std::move(merges), "tokenizer '" + path + "'");
}

}  // namespace trident::data
