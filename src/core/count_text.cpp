#include "core/count_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace trident {

namespace {

// The whole text as a finite number, else empty.
std::optional<double> whole_number(const std::string& t) {
  if (t.empty() || std::isspace(static_cast<unsigned char>(t.front()))) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string trimmed(const std::string& t) {
  const size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
  return a == std::string::npos ? "" : t.substr(a, b - a + 1);
}

}  // namespace

std::optional<double> parse_count(const std::string& text) {
  const std::string t = trimmed(text);
  if (t.empty()) return std::nullopt;
  static const std::pair<char, double> kSuffixes[] = {{'K', 1e3}, {'M', 1e6}, {'B', 1e9}, {'G', 1e9},
                                                      {'T', 1e12}, {'P', 1e15}};
  for (const auto& [s, scale] : kSuffixes)
    if (t.back() == s) {
      const auto v = whole_number(trimmed(t.substr(0, t.size() - 1)));
      if (!v || !std::isfinite(*v * scale)) return std::nullopt;
      return *v * scale;
    }
  return whole_number(t);
}

std::optional<double> parse_rate_with_unit(const std::string& text) {
  const std::string t = trimmed(text);
  static const std::pair<const char*, double> kUnits[] = {
      {"Gb/s", 1e9 / 8}, {"Gbit/s", 1e9 / 8}, {"Gbps", 1e9 / 8}, {"Tb/s", 1e12 / 8}, {"Tbit/s", 1e12 / 8},
      {"GB/s", 1e9},     {"TB/s", 1e12}};
  for (const auto& [unit, scale] : kUnits) {
    const std::string u = unit;
    if (t.size() <= u.size() || t.compare(t.size() - u.size(), u.size(), u) != 0) continue;
    const auto v = whole_number(trimmed(t.substr(0, t.size() - u.size())));
    if (!v) return std::nullopt;
    return *v * scale;
  }
  return std::nullopt;
}

}  // namespace trident
