#include "core/layout.h"

#include "core/dimensions.h"

#include <fmt/format.h>

#include <sstream>

namespace trident {

std::string to_string(Dim dim) {
  switch (dim) {
    case Dim::EDP: return "edp";
    case Dim::DCP: return "dp-cp";
    default: return dimension(dim).name;
  }
}

int64_t Layout::size(Dim dim) const {
  switch (dim) {
    case Dim::EDP: return ep > 0 ? cp * dp / ep : 0;
    case Dim::DCP: return cp * dp;
    default: return this->*dimension(dim).size;
  }
}

std::string default_order(int64_t cp, int64_t ep) { return cp > 1 || ep > 1 ? "tp-cp-ep-dp-pp" : "tp-dp-pp"; }

namespace {
std::vector<std::string> tokens_of(const std::string& order) {
  std::vector<std::string> out;
  std::stringstream in(order);
  std::string token;
  while (std::getline(in, token, '-')) out.push_back(token);
  return out;
}
}  // namespace

bool parse_order(const std::string& order, std::array<Dim, kNumDims>& dims, Problems& problems) {
  std::vector<const Dimension*> seen;
  bool ok = true;
  for (const std::string& token : tokens_of(order)) {
    const Dimension* d = find_dimension(token);
    if (!d) {
      std::string names;
      for (const Dimension& x : dimensions()) names += std::string(names.empty() ? "" : ", ") + x.name;
      problems.add("order '" + order + "' has unknown dimension '" + token + "'",
                   "use " + names + " joined by '-', e.g. --order tp-dp-pp or tp-cp-ep-dp-pp", "order-malformed");
      ok = false;
      continue;
    }
    for (const Dimension* s : seen)
      if (s == d) {
        problems.add("order '" + order + "' names '" + token + "' twice", "name each dimension once", "order-malformed");
        ok = false;
      }
    seen.push_back(d);
  }
  std::string required;
  for (const Dimension& x : dimensions())
    if (!x.order_optional) required += std::string(required.empty() ? "" : ", ") + x.name;
  for (const Dimension& need : dimensions()) {
    bool found = false;
    for (const Dimension* s : seen) found = found || s == &need;
    if (!found && !need.order_optional) {
      problems.add("order '" + order + "' is missing '" + need.name + "'",
                   "name all of " + required + ", e.g. --order tp-dp-pp or --order tp-pp-dp", "order-malformed");
      ok = false;
    }
  }
  // A dimension that is no rank coordinate (ep) splits the data ranks: it stands next to dp.
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i]->dense) continue;
    const bool adjacent = (i > 0 && seen[i - 1]->dim == Dim::DP) || (i + 1 < seen.size() && seen[i + 1]->dim == Dim::DP);
    if (!adjacent) {
      problems.add(fmt::format("order '{}' does not put {} next to dp", order, seen[i]->name),
                   fmt::format("{} splits the data-parallel ranks: write it just before or after dp, e.g. --order "
                               "tp-cp-ep-dp-pp",
                               seen[i]->name),
                   "order-malformed");
      ok = false;
    }
  }
  if (!ok) return false;
  // A dense dimension the string omits (cp) is placed first: its size is 1, so its position changes no rank.
  size_t i = 0;
  for (const Dimension& x : dimensions()) {
    bool named = false;
    for (const Dimension* s : seen) named = named || s == &x;
    if (x.dense && !named) dims[i++] = x.dim;
  }
  for (const Dimension* s : seen)
    if (s->dense) dims[i++] = s->dim;
  return true;
}

std::array<Dim, kNumDims> Layout::dims_fastest_first() const {
  std::array<Dim, kNumDims> dims{Dim::TP, Dim::CP, Dim::DP, Dim::PP};
  Problems ignored;
  parse_order(order, dims, ignored);
  return dims;
}

bool Layout::ep_inner() const {
  const size_t e = order.find("ep"), d = order.find("dp");
  return e == std::string::npos || d == std::string::npos || e < d;
}

std::string Layout::describe() const {
  // "tp 8 x pp 8 x dp 64 x cp 2, ep 4 (order ...)": the dimensions --order must name always, the
  // others when above 1; ep after a comma, as it splits the data ranks rather than multiplying.
  std::string s;
  for (const Dimension& d : dimensions()) {
    const int64_t n = this->*d.size;
    if (d.order_optional && n == 1) continue;
    s += fmt::format("{}{} {}", s.empty() ? "" : d.dense ? " x " : ", ", d.name, n);
  }
  return s + " (order " + order + ")";
}

}  // namespace trident
