// The self-calibration fit as text, JSON and an HTML section (see rehearsal_fit_report.h).
#include "report/rehearsal_fit_report.h"

#include <fmt/format.h>

namespace trident {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "+") + x;
  return s;
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

const char* kRule = "value' = value x S / (M - F): M the measured medians of its terms, P their prediction at the "
                    "value before, S the part of P that scales with 1 / value (P at half the value, less P), F = P - S; "
                    "a link latency (us): S the part of P that scales with it (twice P less P at half the latency), "
                    "latency' = latency x (M - F) / S";

}  // namespace

std::string fit_text(const CostFit& f) {
  std::string out = fmt::format("\nSelf-calibration: the cost table fitted to this rehearsal, one value at a time\n  ({}; "
                                "ms per step)\n", kRule);
  out += fmt::format("  {:<21} {:<14} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "field", "fitted on", "before", "M", "P",
                     "S", "F", "after");
  for (const auto& s : f.steps) {
    out += fmt::format("  {:<21} {:<14} {:>8.4f} {:>9} {:>9} {:>9} {:>9} {:>8.4f}  {}\n", s.field, joined(s.terms),
                       s.before, ms(s.measured_s), ms(s.predicted_s), ms(s.scaling_s), ms(s.fixed_s), s.after, s.what);
    if (!s.note.empty()) out += "    " + s.note + "\n";
  }
  for (const auto& kept : f.kept) {
    const std::string& field = kept.first;  // a plain name: clang 14 cannot capture a structured binding
    out += fmt::format("  {:<21} kept at {:g}: {}\n", field, [&] {
      for (const auto& c : cost_fields())
        if (c.name == field) return f.after.*(c.member);
      return 0.0;
    }(), kept.second);
  }
  return out;
}

nlohmann::json fit_json(const CostFit& f) {
  using nlohmann::json;
  json steps = json::array();
  for (const auto& s : f.steps)
    steps.push_back({{"field", s.field}, {"what", s.what}, {"terms", s.terms}, {"before", s.before}, {"after", s.after},
                     {"measured_s", s.measured_s}, {"predicted_s", s.predicted_s}, {"scaling_s", s.scaling_s},
                     {"fixed_s", s.fixed_s}, {"latency", s.latency}, {"fitted", s.fitted}, {"note", s.note.empty() ? json(nullptr) : json(s.note)}});
  json kept = json::array();
  for (const auto& [field, why] : f.kept) kept.push_back({{"field", field}, {"why", why}});
  json before, after;
  for (const auto& c : cost_fields()) before[c.name] = f.before.*(c.member), after[c.name] = f.after.*(c.member);
  json cluster = json::object();
  for (const auto& [key, us] : f.cluster_after) cluster[key] = us;
  return {{"rule", kRule}, {"steps", steps}, {"kept", kept}, {"before", before}, {"after", after}, {"cluster_after", cluster}};
}

HtmlSection fit_section(const CostFit& f) {
  HtmlSection sec{"self-calibration", "Self-calibration: the cost table fitted to this rehearsal", {kRule}, HtmlTable{}};
  sec.table->header = {"field", "fitted on", "before", "M, ms", "P, ms", "S, ms", "F, ms", "after", "what", "note"};
  for (const auto& s : f.steps)
    sec.table->rows.push_back({s.field, joined(s.terms), fmt::format("{:.4f}", s.before), ms(s.measured_s),
                               ms(s.predicted_s), ms(s.scaling_s), ms(s.fixed_s), fmt::format("{:.4f}", s.after), s.what,
                               s.note});
  for (const auto& [field, why] : f.kept) sec.lines.push_back(field + " kept: " + why);
  return sec;
}

}  // namespace trident
