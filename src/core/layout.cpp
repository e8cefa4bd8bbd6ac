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
    case Dim::EP: return "ep";
    case Dim::EDP: return "edp";
    case Dim::DCP: return "dp-cp";
  }
  return "?";
}

int64_t Layout::size(Dim dim) const {
  switch (dim) {
    case Dim::TP: return tp;
    case Dim::CP: return cp;
    case Dim::DP: return dp;
    case Dim::PP: return pp;
    case Dim::EP: return ep;
    case Dim::EDP: return ep > 0 ? cp * dp / ep : 0;
    case Dim::DCP: return cp * dp;
  }
  return 1;
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
  std::vector<Dim> seen;
  bool ok = true, has_ep = false;
  for (const std::string& token : tokens_of(order)) {
    Dim d;
    if (token == "tp") d = Dim::TP;
    else if (token == "cp") d = Dim::CP;
    else if (token == "dp") d = Dim::DP;
    else if (token == "pp") d = Dim::PP;
    else if (token == "ep") {
      if (has_ep) {
        problems.add("order '" + order + "' names 'ep' twice", "name each dimension once");
        ok = false;
      }
      has_ep = true;
      continue;  // ep splits the data ranks; it places no dense coordinate
    } else {
      problems.add("order '" + order + "' has unknown dimension '" + token + "'",
                   "use tp, dp, pp (and cp, ep) joined by '-', e.g. --order tp-dp-pp or tp-cp-ep-dp-pp");
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
  if (has_ep) {
    const auto t = tokens_of(order);
    bool adjacent = false;
    for (size_t i = 0; i + 1 < t.size(); ++i)
      adjacent = adjacent || (t[i] == "ep" && t[i + 1] == "dp") || (t[i] == "dp" && t[i + 1] == "ep");
    if (!adjacent) {
      problems.add("order '" + order + "' does not put ep next to dp",
                   "ep splits the data-parallel ranks: write it just before or after dp, e.g. --order tp-cp-ep-dp-pp");
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

bool Layout::ep_inner() const {
  const size_t e = order.find("ep"), d = order.find("dp");
  return e == std::string::npos || d == std::string::npos || e < d;
}

std::string Layout::describe() const {
  std::string s = fmt::format("tp {} x pp {} x dp {}", tp, pp, dp);
  if (cp > 1) s += fmt::format(" x cp {}", cp);
  if (ep > 1) s += fmt::format(", ep {}", ep);
  return s + " (order " + order + ")";
}

void validate_layout(const Layout& l, Problems& p) {
  for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP})
    if (l.size(d) <= 0)
      p.add(fmt::format("--{} is {}, must be positive", to_string(d), l.size(d)),
            fmt::format("give --{} 1 or more", to_string(d)));
  std::array<Dim, kNumDims> dims;
  if (!parse_order(l.order, dims, p)) return;
  const auto named = [&](const char* token) {
    for (const auto& t : tokens_of(l.order))
      if (t == token) return true;
    return false;
  };
  if (l.cp > 1 && !named("cp"))
    p.add(fmt::format("cp is {} but order '{}' does not place it", l.cp, l.order),
          "add cp to the order, e.g. --order tp-cp-dp-pp (Megatron's default is tp-cp-ep-dp-pp)");
  if (l.ep > 1 && !named("ep"))
    p.add(fmt::format("ep is {} but order '{}' does not place it", l.ep, l.order),
          "add ep next to dp, e.g. --order tp-cp-ep-dp-pp");
  if (l.ep > 0 && l.cp > 0 && l.dp > 0 && (l.cp * l.dp) % l.ep != 0)
    p.add(fmt::format("ep {} does not divide the {} data ranks (dp {} x cp {})", l.ep, l.cp * l.dp, l.dp, l.cp),
          fmt::format("expert parallel splits the dp x cp ranks: use --ep dividing {}", l.cp * l.dp));
}

}  // namespace trident
