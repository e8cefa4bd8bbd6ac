#include "report/palette.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/step_terms.h"

namespace trident {

namespace {

// Paul Tol's "muted" scheme, and two greys for the idle and the unexplained (the step terms'
// fills are in their rows, core/step_terms.cpp).
constexpr const char* kIndigo = "#332288";
constexpr const char* kCyan = "#88CCEE";
constexpr const char* kTeal = "#44AA99";
constexpr const char* kGreen = "#117733";
constexpr const char* kOlive = "#999933";
constexpr const char* kSand = "#DDCC77";
constexpr const char* kRose = "#CC6677";
constexpr const char* kPurple = "#AA4499";
constexpr const char* kPaleGrey = "#DDDDDD";
constexpr const char* kMidGrey = "#777777";

struct Rgb {
  double r, g, b;
};
Rgb rgb_of(const std::string& hex) {
  auto at = [&](size_t i) { return double(std::stoi(hex.substr(i, 2), nullptr, 16)); };
  return {at(1), at(3), at(5)};
}
// WCAG relative luminance: black ink where it contrasts more than white.
std::string ink_for(const std::string& hex) {
  const Rgb c = rgb_of(hex);
  auto lin = [](double v) {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
  };
  const double l = 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  return (l + 0.05) / 0.05 > 1.05 / (l + 0.05) ? "#000" : "#fff";
}

TermColour make(const std::string& term, const char* fill) { return {term, fill, ink_for(fill)}; }

const std::map<std::string, TermColour>& table() {
  static const std::map<std::string, TermColour> t = [] {
    std::map<std::string, TermColour> m;
    auto add = [&](const std::string& term, const char* fill) { m[term] = make(term, fill); };
    // The step's terms (planner, simulated and rehearsed shares): each row's colour
    // (core/step_terms.h), and grey for what is left of the step.
    for (const StepTerm& t : step_time_terms())
      if (t.fill) add(t.key, t.fill);
    add("other", kMidGrey);
    // The memory parts (their own chart; the optimizer states keep the optimizer's colour).
    add("weights", kIndigo);
    add("gradients", kTeal);
    add("activations", kRose);
    add("overhead", kPaleGrey);
    // The timeline's block kinds: forward in compute's colour, the messages in their term's (its
    // DP buckets are "dp", its optimizer "opt").
    add("F", kIndigo);
    add("B", kGreen);
    add("W", kSand);
    add("send", kRose);
    add("gather", kCyan);
    add("emb", kPurple);
    add("opt", kOlive);
    // The loss curve: training loss per step, validation loss per evaluation.
    add("loss", kIndigo);
    add("val_loss", kRose);
    return m;
  }();
  return t;
}

// The rehearsal's row keys ("dp_exposed") and the timeline's other names of a term.
std::string canonical(const std::string& term) {
  if (const StepTerm* t = step_time_term_by_share_key(term); t && t->fill) return t->key;
  return term == "recv" ? "send" : term;
}

}  // namespace

const TermColour& term_colour(const std::string& term) {
  static const TermColour unknown = make("", kMidGrey);
  const auto it = table().find(canonical(term));
  return it == table().end() ? unknown : it->second;
}

const std::vector<std::string>& step_terms() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> keys;
    for (const StepTerm& t : step_time_terms())
      if (t.fill) keys.push_back(t.key);
    keys.push_back("other");
    return keys;
  }();
  return v;
}
const std::vector<std::string>& memory_terms() {
  static const std::vector<std::string> v = {"weights", "gradients", "optimizer", "activations", "overhead"};
  return v;
}
const std::vector<std::string>& timeline_kinds() {
  static const std::vector<std::string> v = {"F", "B", "W", "send", "dp", "gather", "emb", "opt"};
  return v;
}

TermColour chunk_shade(const TermColour& base, int chunk, int chunks) {
  if (chunks <= 1 || chunk <= 0) return base;
  const double t = 0.6 * double(std::min(chunk, chunks - 1)) / double(chunks - 1);
  const Rgb c = rgb_of(base.fill);
  auto mix = [&](double v) { return int(std::lround(v + (255 - v) * t)); };
  const std::string fill = fmt::format("#{:02X}{:02X}{:02X}", mix(c.r), mix(c.g), mix(c.b));
  return {base.term, fill, ink_for(fill)};
}

}  // namespace trident
