#include "core/pipeline_layout.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace trident {

namespace {
constexpr int64_t kMaxExpanded = 1 << 20;  // symbols after the repeats: far beyond any model
constexpr int kMaxDepth = 32;               // nested groups: the parser recurses once per '('

// Recursive descent over the text: a sequence of symbols (E t m L |) and groups, each optionally
// followed by *N; returns the expansion of the sequence up to ')' or the end.
struct Expander {
  const std::string& s;
  size_t i = 0;
  std::string error;

  int64_t count() {
    if (i >= s.size() || s[i] != '*') return 1;
    const size_t star = i++;
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (start == i || i - start > 7) {
      error = fmt::format("'*' at position {} is not followed by a repeat count (1 to 9999999)", star);
      return 0;
    }
    return std::stoll(s.substr(start, i - start));
  }

  std::string sequence(int depth) {
    std::string out;
    while (i < s.size() && error.empty()) {
      const char c = s[i];
      std::string part;
      if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      } else if (c == ')') {
        if (depth == 0) error = fmt::format("')' at position {} closes no '('", i);
        return out;
      } else if (c == '(') {
        if (depth >= kMaxDepth) {  // bounded, so a deep nesting cannot exhaust the stack
          error = fmt::format("'(' at position {} nests groups deeper than {}", i, kMaxDepth);
          return out;
        }
        const size_t open = i++;
        part = sequence(depth + 1);
        if (!error.empty()) return out;
        if (i >= s.size()) {
          error = fmt::format("'(' at position {} is never closed", open);
          return out;
        }
        ++i;  // ')'
      } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
        part = std::string(1, c);
        ++i;
      } else {
        error = fmt::format("'{}' at position {} is no layout symbol (E embedding, t decoder layer, m MTP module, "
                            "L loss, | between chunks)", c, i);
        return out;
      }
      const int64_t n = count();
      if (!error.empty()) return out;
      if (int64_t(out.size()) + n * int64_t(part.size()) > kMaxExpanded) {
        error = fmt::format("the repeats expand to more than {} symbols", kMaxExpanded);
        return out;
      }
      for (int64_t k = 0; k < n; ++k) out += part;
    }
    return out;
  }
};
}  // namespace

PipelineLayout parse_pipeline_layout(const std::string& text, Problems& p) {
  PipelineLayout l;
  if (text.empty()) return l;
  Expander x{text, 0, ""};
  const std::string flat = x.sequence(0);
  if (!x.error.empty()) {
    // A long text is shown by its start: the position in the error says where.
    const std::string shown = text.size() > 80 ? text.substr(0, 77) + "..." : text;
    p.add(fmt::format("--pipeline-layout '{}': {}", shown, x.error),
          "write Megatron-Core's --pipeline-model-parallel-layout, e.g. \"Et*4|(t*4|)*14tmL\"", "pipeline-layout");
    return l;
  }
  l.text = text;
  auto chunk = [&] {
    l.decoders.push_back(0), l.mtp.push_back(0), l.embedding.push_back(0), l.loss.push_back(0);
  };
  chunk();
  bool first_symbol = true;
  for (char c : flat) {
    if (c == '|') {
      chunk();
      continue;
    }
    if (first_symbol) l.first_is_embedding = c == 'E';
    first_symbol = false;
    (c == 't' ? l.decoders : c == 'm' ? l.mtp : c == 'E' ? l.embedding : l.loss).back() += 1;
  }
  return l;
}

void check_pipeline_layout(const PipelineLayout& l, int64_t layers, int64_t mtp_layers, int64_t pp, int64_t v,
                           const char* code, Problems& p) {
  if (l.empty()) return;
  const std::string name = fmt::format("--pipeline-layout '{}'", l.text);
  const int64_t chunks = pp * std::max<int64_t>(v, 1), last = l.chunks() - 1;
  if (l.chunks() != chunks)
    p.add(fmt::format("{} has {} chunks, but pp {} x virtual stages {} = {}", name, l.chunks(), pp, v, chunks),
          fmt::format("give {} chunks separated by '|', or the pp and --virtual-stages whose product is {}", chunks,
                      l.chunks()),
          code);
  int64_t decoders = 0, mtp = 0, embedding = 0, loss = 0;
  for (int64_t c = 0; c <= last; ++c) {
    decoders += l.decoders[size_t(c)], mtp += l.mtp[size_t(c)];
    embedding += l.embedding[size_t(c)], loss += l.loss[size_t(c)];
  }
  if (decoders != layers)
    p.add(fmt::format("{} places {} decoder layers (t), but the model has {}", name, decoders, layers),
          fmt::format("give {} t symbols in all", layers), code);
  if (embedding != 1 || !l.first_is_embedding)
    p.add(fmt::format("{} must start with the embedding (E) and name it once (it names it {} times)", name, embedding),
          "begin the first chunk with E and use E nowhere else", code);
  if (loss != 1 || l.loss[size_t(last)] != 1)
    p.add(fmt::format("{} must place the loss (L) once, in the last chunk", name),
          "end the last chunk with L and use L nowhere else", code);
  // The planner costs the MTP modules on the last stage, after its layers (plan/cost_model.cpp);
  // a layout that places them elsewhere is refused rather than costed where it does not run.
  if (mtp != mtp_layers || l.mtp[size_t(last)] != mtp)
    p.add(fmt::format("{} places {} MTP modules (m){}, but the model has {} and the planner costs them in the last "
                      "chunk",
                      name, mtp, mtp == l.mtp[size_t(last)] ? "" : " outside the last chunk", mtp_layers),
          fmt::format("place {} m symbols in the last chunk, before L", mtp_layers), code);
  for (int64_t c = 0; c <= last; ++c)
    if (l.decoders[size_t(c)] + l.mtp[size_t(c)] == 0 && c != 0 && c != last)
      p.add(fmt::format("{}: chunk {} holds no layer", name, c), "give every middle chunk at least one t", code);
}

}  // namespace trident
