// Hugging Face byte-level BPE from tokenizer.json (see hf_tokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/data/hf_tokenizer.h"

#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/problems.h"

namespace trident::data {
namespace {

using json = nlohmann::json;
const char* const kFix = "give the tokenizer.json of a byte-level BPE (GPT-2, Llama 3 or Qwen2 style)";
// ByteLevel's own split (use_regex), as Hugging Face's tokenizers and GPT-2's encoder.py write it.
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += char(cp);
  else if (cp < 0x800) s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 63));
  else s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 63)), s += char(0x80 | (cp & 63));
  return s;
}

// The byte offset of the first byte that is not part of valid UTF-8, or npos.
size_t invalid_utf8_at(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + size_t(len) > n) return i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 31) : len == 3 ? (c & 15) : (c & 7);
    for (int k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((d >> 6) != 2) return i;
      cp = (cp << 6) | (d & 63);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8 either.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += size_t(len);
  }
  return std::string::npos;
}

size_t utf8_length(unsigned char c) { return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4; }

}  // namespace

const std::vector<std::string>& byte_level_chars() {
  // GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others take the code
  // points from 256 up, in byte order.
  static const std::vector<std::string> chars = [] {
    std::vector<std::string> out(256);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      out[b] = utf8(printable ? b : next++);
    }
    return out;
  }();
  return chars;
}

HfTokenizer::~HfTokenizer() {
  for (void* code : splits_) pcre2_code_free(static_cast<pcre2_code*>(code));
  if (match_context_) pcre2_match_context_free(static_cast<pcre2_match_context*>(match_context_));
}

std::shared_ptr<const HfTokenizer> HfTokenizer::from_json(const std::string& text, const std::string& origin) {
  try {
    return read(text, origin);
  } catch (const nlohmann::json::exception& e) {
    // A key of the wrong type (a number where a name goes): the library's words, with the file's name.
    Problems p;
    p.add(origin + " has a value of the wrong type (" + std::string(e.what()).substr(0, 160) + ")", kFix,
          "hf-tokenizer-json");
    p.throw_if_any();
  }
  return nullptr;
}

std::shared_ptr<const HfTokenizer> HfTokenizer::read(const std::string& text, const std::string& origin) {
  std::shared_ptr<HfTokenizer> t(new HfTokenizer());
  t->text_ = text;
  Problems p;
  const json root = json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    p.add(origin + " is not a JSON object (a Hugging Face tokenizer.json)", kFix, "hf-tokenizer-json");
    p.throw_if_any();
  }
  const auto refuse = [&](const std::string& what, const char* code = "hf-tokenizer-unsupported") {
    p.add(origin + ": " + what, kFix, code);
  };
  const json& model = root.contains("model") ? root["model"] : json();
  if (!model.is_object() || model.value("type", std::string()) != "BPE") {
    refuse("model type '" + (model.is_object() ? model.value("type", std::string("none")) : std::string("none")) +
           "': Trident reads byte-level BPE (model type BPE)");
    p.throw_if_any();
  }
  // Settings of the model that change ids: only their neutral values are read.
  const auto neutral = [&](const char* key, const json& ok) {
    if (model.contains(key) && !model[key].is_null() && model[key] != ok)
      refuse(fmt::format("model.{} {} changes the ids and is not read", key, model[key].dump().substr(0, 60)));
  };
  neutral("dropout", json());
  neutral("continuing_subword_prefix", "");
  neutral("end_of_word_suffix", "");
  neutral("byte_fallback", false);
  if (model.contains("ignore_merges") && model["ignore_merges"].is_boolean()) t->ignore_merges_ = model["ignore_merges"].get<bool>();
  if (root.contains("normalizer") && !root["normalizer"].is_null())
    refuse("normalizer '" + (root["normalizer"].is_object() ? root["normalizer"].value("type", std::string("?")) : std::string("?")) +
           "' is not read (it changes the text before the ids)");
  if (root.contains("decoder") && !root["decoder"].is_null() &&
      !(root["decoder"].is_object() && root["decoder"].value("type", std::string()) == "ByteLevel"))
    refuse("decoder '" + root["decoder"].dump().substr(0, 60) + "': a byte-level BPE decodes with ByteLevel");

  // Pre-tokenizer: Split regexes (Isolated) and one ByteLevel, alone or in a Sequence.
  std::vector<std::pair<std::string, bool>> patterns;  // (pattern, literal)
  int byte_level = 0;
  const auto pre = [&](const json& pt) {
    const std::string type = pt.is_object() ? pt.value("type", std::string()) : std::string();
    if (type == "ByteLevel") {
      ++byte_level;
      if (pt.value("add_prefix_space", false)) refuse("pre_tokenizer ByteLevel add_prefix_space true is not read");
      if (pt.value("use_regex", true)) patterns.push_back({kGpt2Pattern, false});
    } else if (type == "Split") {
      const json& pat = pt.contains("pattern") ? pt["pattern"] : json();
      if (pt.value("behavior", std::string()) != "Isolated" || pt.value("invert", false))
        refuse("pre_tokenizer Split behavior '" + pt.value("behavior", std::string()) + "'" +
               (pt.value("invert", false) ? " inverted" : "") + ": Trident reads Isolated, not inverted");
      else if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string())
        patterns.push_back({pat["Regex"].get<std::string>(), false});
      else if (pat.is_object() && pat.contains("String") && pat["String"].is_string())
        patterns.push_back({pat["String"].get<std::string>(), true});
      else
        refuse("pre_tokenizer Split has no pattern {\"Regex\": ...} or {\"String\": ...}");
    } else {
      refuse("pre_tokenizer '" + (type.empty() ? pt.dump().substr(0, 60) : type) + "' is not read");
    }
  };
  const json& pt = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  if (pt.is_object() && pt.value("type", std::string()) == "Sequence" && pt.contains("pretokenizers") &&
      pt["pretokenizers"].is_array())
    for (const json& one : pt["pretokenizers"]) pre(one);
  else if (!pt.is_null())
    pre(pt);
  if (byte_level != 1) refuse("the pre_tokenizer has no ByteLevel step: not a byte-level BPE");

  // Vocabulary: byte-level strings, each spelling bytes.
  std::unordered_map<std::string, unsigned char> char_byte;
  for (int b = 0; b < 256; ++b) char_byte[byte_level_chars()[size_t(b)]] = static_cast<unsigned char>(b);
  constexpr int64_t kMaxId = int64_t(1) << 24;
  const json& vocab = model.contains("vocab") ? model["vocab"] : json();
  if (!vocab.is_object()) refuse("model.vocab is not a table {token: id}");
  else
    for (const auto& [tok, id] : vocab.items()) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= uint64_t(kMaxId)) {
        refuse(fmt::format("model.vocab gives '{}' the id {} (ids are 0 .. 2^24)", tok.substr(0, 40), id.dump().substr(0, 20)));
        break;
      }
      std::string bytes;
      for (size_t i = 0; i < tok.size();) {
        const size_t len = std::min(utf8_length(static_cast<unsigned char>(tok[i])), tok.size() - i);
        auto c = char_byte.find(tok.substr(i, len));
        if (c == char_byte.end()) { bytes.clear(); break; }
        bytes += char(c->second);
        i += len;
      }
      if (bytes.empty()) {
        refuse(fmt::format("model.vocab entry '{}' (id {}) is not byte-level text", tok.substr(0, 40), id.get<uint64_t>()));
        break;
      }
      const int32_t i = int32_t(id.get<uint64_t>());
      t->vocab_[tok] = i;
      if (size_t(i) >= t->bytes_of_.size()) t->bytes_of_.resize(size_t(i) + 1);
      if (!t->bytes_of_[size_t(i)].empty()) {  // one id, two spellings: decoding could not tell them apart
        refuse(fmt::format("model.vocab gives the id {} to two tokens", i));
        break;
      }
      t->bytes_of_[size_t(i)] = bytes;
    }
  for (int b = 0; b < 256 && p.empty(); ++b)
    if (!t->vocab_.count(byte_level_chars()[size_t(b)]))
      refuse(fmt::format("model.vocab has no token for byte {} ('{}'): a byte-level BPE has all 256", b, byte_level_chars()[size_t(b)]));
  p.throw_if_any();

  // Merges: "a b" strings (or [a, b] pairs), rank by position; the merged token must be in the vocabulary.
  const json& merges = model.contains("merges") ? model["merges"] : json();
  if (!merges.is_array()) refuse("model.merges is not a list");
  for (size_t r = 0; merges.is_array() && r < merges.size(); ++r) {
    const json& m = merges[r];
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos) a = s.substr(0, space), b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    }
    auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), ab = t->vocab_.find(a + b);
    if (a.empty() || b.empty() || ia == t->vocab_.end() || ib == t->vocab_.end() || ab == t->vocab_.end()) {
      refuse(fmt::format("merge {} ({}) joins tokens that are not in model.vocab, or makes one that is not", r,
                         m.dump().substr(0, 60)));
      break;
    }
    t->ranks_.emplace(pair_key(ia->second, ib->second), std::pair<int32_t, int32_t>{int32_t(r), ab->second});
  }

  // Added tokens: matched in the raw text before anything else.
  const json& added = root.contains("added_tokens") ? root["added_tokens"] : json::array();
  for (const json& a : added.is_array() ? added : json::array()) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || a["content"].get<std::string>().empty() ||
        !a.contains("id") || !a["id"].is_number_unsigned() || a["id"].get<uint64_t>() >= uint64_t(kMaxId)) {
      refuse("added_tokens holds " + a.dump().substr(0, 60) + ", not {\"id\", \"content\"}");
      break;
    }
    const std::string content = a["content"].get<std::string>();
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (a.value(flag, false)) refuse(fmt::format("added token '{}' has {} true, which is not read", content.substr(0, 40), flag));
    const int32_t id = int32_t(a["id"].get<uint64_t>());
    t->added_.push_back({content, id});
    if (size_t(id) >= t->bytes_of_.size()) t->bytes_of_.resize(size_t(id) + 1);
    // GPT-2 lists <|endoftext|> in both: the same text under the same id is one token.
    if (!t->bytes_of_[size_t(id)].empty() && t->bytes_of_[size_t(id)] != content) {
      refuse(fmt::format("added token '{}' has the id {}, which spells '{}' in model.vocab", content.substr(0, 40), id,
                         t->bytes_of_[size_t(id)].substr(0, 40)));
      break;
    }
    t->bytes_of_[size_t(id)] = content;
  }
  std::stable_sort(t->added_.begin(), t->added_.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  t->vocab_size_ = int64_t(t->bytes_of_.size());

  // The split patterns, compiled once (Unicode classes: PCRE2_UCP, as the regex engines of
  // Hugging Face and Python's regex module treat \s, \w and \d).
  for (const auto& [pattern, literal] : patterns) {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0), &err, &at, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      refuse(fmt::format("the Split pattern '{}' does not compile at offset {}: {}", pattern.substr(0, 80), size_t(at),
                         reinterpret_cast<const char*>(msg)));
      continue;
    }
    t->splits_.push_back(code);
  }
  // A pattern that backtracks without end is stopped (an error naming it), never a hang.
  auto* ctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(ctx, 10'000'000);
  pcre2_set_depth_limit(ctx, 100'000);
  t->match_context_ = ctx;
  p.throw_if_any();
  return t;
}

std::vector<int32_t> HfTokenizer::encode(const std::string& text) const {
  if (const size_t bad = invalid_utf8_at(text); bad != std::string::npos) {
    Problems p;
    p.add(fmt::format("the text is not UTF-8 at byte {}: a tokenizer.json tokenizer reads Unicode text", bad),
          "convert the text to UTF-8", "hf-tokenizer-text");
    p.throw_if_any();
  }
  std::vector<int32_t> out;
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  size_t span = 0, i = 0;
  while (i < text.size()) {
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& a : added_)  // longest first: the first that matches is the longest
      if (text.compare(i, a.first.size(), a.first) == 0) { hit = &a; break; }
    if (!hit) { ++i; continue; }
    encode_span(text, span, i, out, cache);
    out.push_back(hit->second);
    i += hit->first.size();
    span = i;
  }
  encode_span(text, span, text.size(), out, cache);
  return out;
}

void HfTokenizer::encode_span(const std::string& text, size_t begin, size_t end, std::vector<int32_t>& out,
                              std::unordered_map<std::string, std::vector<int32_t>>& cache) const {
  if (begin >= end) return;
  // Each split pattern cuts every piece of the one before (Isolated: matches and gaps both kept).
  std::vector<std::pair<size_t, size_t>> pieces = {{begin, end}};
  pcre2_match_data* md = nullptr;
  for (void* code_ptr : splits_) {
    auto* code = static_cast<pcre2_code*>(code_ptr);
    if (!md) md = pcre2_match_data_create(8, nullptr);
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& [b, e] : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + b);
      const size_t n = e - b;
      size_t at = 0, gap = 0;
      while (at < n) {
        const int rc = pcre2_match(code, subject, n, at, PCRE2_NO_UTF_CHECK, md,
                                   static_cast<pcre2_match_context*>(match_context_));
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          Problems p;
          p.add("the tokenizer's Split pattern gave up on the text (PCRE2 error " + std::to_string(rc) +
                    ": too much backtracking)",
                kFix, "hf-tokenizer-pattern");
          p.throw_if_any();
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // an empty match cuts nothing: step over one character
          at = ms + utf8_length(static_cast<unsigned char>(text[b + ms]));
          continue;
        }
        if (ms > gap) next.push_back({b + gap, b + ms});
        next.push_back({b + ms, b + me});
        at = gap = me;
      }
      if (gap < n) next.push_back({b + gap, e});
    }
    pieces = std::move(next);
  }
  if (md) pcre2_match_data_free(md);
  const auto& chars = byte_level_chars();
  for (const auto& [b, e] : pieces) {
    std::string piece;
    for (size_t k = b; k < e; ++k) piece += chars[static_cast<unsigned char>(text[k])];
    auto it = cache.find(piece);
    if (it == cache.end()) {
      std::vector<int32_t> ids;
      encode_piece(piece, ids);
      it = cache.emplace(piece, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

void HfTokenizer::encode_piece(const std::string& piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> s;
  for (size_t i = 0; i < piece.size();) {
    const size_t len = utf8_length(static_cast<unsigned char>(piece[i]));
    s.push_back(vocab_.at(piece.substr(i, len)));  // every byte's character is in the vocabulary (checked)
    i += len;
  }
  // The pair of lowest rank, the leftmost of equals, until none merges (Hugging Face's order).
  while (s.size() > 1) {
    size_t best = 0;
    int32_t best_rank = -1, merged = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto r = ranks_.find(pair_key(s[i], s[i + 1]));
      if (r != ranks_.end() && (best_rank < 0 || r->second.first < best_rank))
        best = i, best_rank = r->second.first, merged = r->second.second;
    }
    if (best_rank < 0) break;
    s[best] = merged;
    s.erase(s.begin() + std::ptrdiff_t(best) + 1);
  }
  out.insert(out.end(), s.begin(), s.end());
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids)
    if (id >= 0 && size_t(id) < bytes_of_.size()) s += bytes_of_[size_t(id)];
  return s;
}

}  // namespace trident::data
