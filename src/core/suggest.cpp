#include "core/suggest.h"

#include <algorithm>
#include <cctype>

namespace trident {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Optimal string alignment distance: a swapped pair ("modle") is one edit, as a user counts it.
size_t distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::optional<std::string> closest_choice(const std::string& word, const std::vector<std::string>& choices) {
  if (word.empty() || choices.empty()) return std::nullopt;
  const std::string w = lower(word);
  const size_t limit = std::clamp<size_t>(w.size() / 3, 1, 3);
  std::optional<std::string> best;
  size_t best_d = limit + 1;
  for (const auto& c : choices) {
    const size_t d = distance(w, lower(c));
    if (d < best_d) best_d = d, best = c;
  }
  if (best) return best;
  // A prefix of one name only ("--global" for --global-batch-size).
  std::optional<std::string> prefixed;
  for (const auto& c : choices)
    if (w.size() >= 3 && lower(c).rfind(w, 0) == 0) {
      if (prefixed) return std::nullopt;
      prefixed = c;
    }
  return prefixed;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& choices, const std::string& prefix) {
  const auto c = closest_choice(word, choices);
  return c ? "did you mean '" + prefix + *c + "'? " : "";
}

}  // namespace trident
