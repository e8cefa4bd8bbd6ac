#include "core/layout.h"

#include "core/dimensions.h"

#include <fmt/format.h>

#include <algorithm>
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
    case Dim::EDP: return ep > 0 && etp > 0 ? tp * cp * dp / (ep * etp) : 0;
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
    if (!d || !d->ordered) {
      std::string names;
      for (const Dimension& x : dimensions())
        if (x.ordered) names += std::string(names.empty() ? "" : ", ") + x.name;
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
    if (x.ordered && !x.order_optional) required += std::string(required.empty() ? "" : ", ") + x.name;
  for (const Dimension& need : dimensions()) {
    bool found = false;
    for (const Dimension* s : seen) found = found || s == &need;
    if (!found && need.ordered && !need.order_optional) {
      problems.add("order '" + order + "' is missing '" + need.name + "'",
                   "name all of " + required + ", e.g. --order tp-dp-pp or --order tp-pp-dp", "order-malformed");
      ok = false;
    }
  }
  // ep may stand anywhere: the expert grid reads the order with tp as etp and dp as edp
  // (expert_dims_fastest_first); the pipeline rule (expert-grid-keeps-stages) checks the stages.
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

std::array<Dim, kNumDims> Layout::expert_dims_fastest_first() const {
  std::array<Dim, kNumDims> out{Dim::EP, Dim::ETP, Dim::EDP, Dim::PP};
  const std::vector<std::string> tokens = tokens_of(order);
  size_t i = std::find(tokens.begin(), tokens.end(), "ep") == tokens.end() ? 1 : 0;  // an omitted ep (size 1) first
  for (const std::string& token : tokens) {
    if (i >= out.size()) break;
    if (token == "tp") out[i++] = Dim::ETP;
    else if (token == "ep") out[i++] = Dim::EP;
    else if (token == "dp") out[i++] = Dim::EDP;
    else if (token == "pp") out[i++] = Dim::PP;
  }
  return out;
}

std::string Layout::describe() const {
  // "tp 8 x pp 8 x dp 64 x cp 2, ep 4, etp 2 (order ...)": the dimensions --order must name
  // always, the others when above 1; ep and etp after a comma, as they lay the ranks out again
  // for the experts rather than multiplying.
  std::string s;
  for (const Dimension& d : dimensions()) {
    const int64_t n = this->*d.size;
    if (d.order_optional && n == 1) continue;
    s += fmt::format("{}{} {}", s.empty() ? "" : d.dense ? " x " : ", ", d.name, n);
  }
  return s + " (order " + order + ")";
}

}  // namespace trident
