// The plan beside its rehearsal as text and HTML (see rehearsal_shape_report.h).
#include "report/rehearsal_shape_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace trident {

std::string shape_table(const RehearsalShape& s) {
  size_t w0 = 10, w1 = 7, w2 = 9;
  for (const auto& r : s.rows) w0 = std::max(w0, r.what.size()), w1 = std::max(w1, r.planned.size()), w2 = std::max(w2, r.rehearsed.size());
  std::string out = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", "", w0, "plan", w1, "rehearsal", w2, "how");
  for (const auto& r : s.rows)
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", r.what, w0, r.planned, w1, r.rehearsed, w2, r.why);
  if (!s.ranks_why.empty()) out += "  ranks: " + s.ranks_why + "\n";
  out += "  not exercised:";
  if (s.not_exercised.empty()) out += " nothing: every dimension and host crossing of the plan is rehearsed\n";
  for (const auto& x : s.not_exercised) out += "\n    " + x.text;
  if (!s.not_exercised.empty()) out += "\n";
  out += "  stack settings CPU ranks replace:";
  if (s.substitutions.empty()) out += " none\n";
  else {
    out += "\n";
    for (const auto& x : s.substitutions) out += "    " + x + "\n";
  }
  return out;
}

HtmlSection shape_section(const RehearsalShape& s) {
  HtmlSection sec{"rehearsal-shape", "The plan and its rehearsal", {}, HtmlTable{}};
  sec.table->header = {"", "plan", "rehearsal", "how"};
  for (const auto& r : s.rows) sec.table->rows.push_back({r.what, r.planned, r.rehearsed, r.why});
  if (!s.ranks_why.empty()) sec.lines.push_back("Ranks: " + s.ranks_why);
  for (const auto& x : s.not_exercised) sec.lines.push_back("Not exercised: " + x.text);
  for (const auto& x : s.substitutions) sec.lines.push_back("CPU ranks replace: " + x);
  return sec;
}

}  // namespace trident
