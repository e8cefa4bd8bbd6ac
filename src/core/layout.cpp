#include "core/layout.h"

#include <fmt/format.h>

#include <sstream>

namespace trident {

std::string to_string(Dim dim) {
  switch (dim) {
    case Dim::TP: return "tp";
    case Dim::CP: return "cp";
    case Dim::DP: return "dp";
    case Dim::PP: return "pp";
  }
  return "?";
}

int64_t Layout::size(Dim dim) const {
  switch (dim) {
    case Dim::TP: return tp;
    case Dim::CP: return cp;
    case Dim::DP: return dp;
    case Dim::PP: return pp;
  }
  return 1;
}

bool parse_order(const std::string& order, std::array<Dim, kNumDims>& dims, Problems& problems) {
  std::vector<Dim> seen;
  std::stringstream in(order);
  std::string token;
  bool ok = true;
  while (std::getline(in, token, '-')) {
    Dim d;
    if (token == "tp") d = Dim::TP;
    else if (token == "cp") d = Dim::CP;
    else if (token == "dp") d = Dim::DP;
    else if (token == "pp") d = Dim::PP;
    else {
      problems.add("order '" + order + "' has unknown dimension '" + token + "'",
                   "use tp, dp, pp (and cp) joined by '-', e.g. --order tp-dp-pp");
      ok = false;
      continue;
    }
    for (Dim s : seen)
      if (s == d) {
        problems.add("order '" + order + "' names '" + token + "' twice", "name each dimension once");
        ok = false;
      }
    seen.push_back(d);
  }
  for (Dim need : {Dim::TP, Dim::DP, Dim::PP}) {
    bool found = false;
    for (Dim s : seen) found = found || s == need;
    if (!found) {
      problems.add("order '" + order + "' is missing '" + to_string(need) + "'",
                   "name all of tp, dp and pp, e.g. --order tp-dp-pp or --order tp-pp-dp");
      ok = false;
    }
  }
  if (!ok) return false;
  // cp, when absent, is placed first (it has size 1, so its position changes no rank).
  size_t i = 0;
  bool has_cp = false;
  for (Dim s : seen) has_cp = has_cp || s == Dim::CP;
  if (!has_cp) dims[i++] = Dim::CP;
  for (Dim s : seen) dims[i++] = s;
  return true;
}

std::array<Dim, kNumDims> Layout::dims_fastest_first() const {
  std::array<Dim, kNumDims> dims{Dim::TP, Dim::CP, Dim::DP, Dim::PP};
  Problems ignored;
  parse_order(order, dims, ignored);
  return dims;
}

std::string Layout::describe() const {
  std::string s = fmt::format("tp {} x pp {} x dp {}", tp, pp, dp);
  if (cp > 1) s += fmt::format(" x cp {}", cp);
  return s + " (order " + order + ")";
}

void validate_layout(const Layout& l, Problems& p) {
  for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP})
    if (l.size(d) <= 0)
      p.add(fmt::format("--{} is {}, must be positive", to_string(d), l.size(d)),
            fmt::format("give --{} 1 or more", to_string(d)));
  std::array<Dim, kNumDims> dims;
  if (parse_order(l.order, dims, p) && l.cp > 1 && l.order.find("cp") == std::string::npos)
    p.add(fmt::format("cp is {} but order '{}' does not place it", l.cp, l.order),
          "add cp to the order, e.g. --order tp-cp-dp-pp");
  if (l.cp > 1)
    p.add(fmt::format("context parallel (cp {}) is not supported yet", l.cp), "use --cp 1");
}

}  // namespace trident
