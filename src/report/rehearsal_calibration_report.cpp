// The rehearsal's self-calibration as text, JSON and HTML (see rehearsal_calibration_report.h).
#include "report/rehearsal_calibration_report.h"

#include <fmt/format.h>

namespace trident {

namespace {

std::string pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }
std::string ms(double s) { return fmt::format("{:.2f}", s * 1e3); }

std::string heading(const LayoutErrors& e) {
  return e.label + (e.in_sample ? " (fitted on)" : " (out of sample: not fitted on)");
}

}  // namespace

std::string LinkCheck::text() const {
  if (layout.empty()) return field + ": not tested out of sample (one layout rehearsed: add --tp-across)";
  if (terms.empty()) return field + ": not tested out of sample (no term of " + layout + " depends on it alone)";
  std::string keys;
  for (const auto& k : terms) keys += (keys.empty() ? "" : "+") + k;
  return fmt::format("{}: tested on {} of {}: {} ms measured, {} ms predicted before the fit, {} ms after: {}", field,
                     keys, layout, ms(measured_s), ms(before_s), ms(after_s),
                     improves() ? "closer" : "not closer");
}

std::string calibration_text(const Calibration& c) {
  std::string out = fit_text(c.fit) + "  written to " + c.cost_file + " (a [cost] file: plan, simulate and train read it "
                                                                      "with --cost)\n";
  if (!c.cluster_file.empty())
    out += "  fitted latencies written to " + c.cluster_file + " (the prediction's cluster with them; the predictions "
           "after the fit use it)\n";
  out += "\nPrediction error (predicted / measured - 1), before and after the fit, ms per step\n";
  for (const auto& e : c.layouts) {
    out += "  " + heading(e) + "\n";
    out += fmt::format("    {:<20} {:>9} {:>9} {:>8} {:>9} {:>8}\n", "term", "measured", "before", "error", "after",
                       "error");
    for (const auto& t : e.terms)
      out += fmt::format("    {:<20} {:>9} {:>9} {:>8} {:>9} {:>8}\n", t.label, ms(t.measured_s), ms(t.before_s),
                         pct(t.error_before()), ms(t.after_s), pct(t.error_after()));
  }
  out += "Link shares out of sample (only a share that comes closer on the layout it was not fitted on goes back to "
         "the plan):\n";
  for (const auto& k : c.checks) out += "  " + k.text() + "\n";
  return out;
}

nlohmann::json calibration_json(const Calibration& c) {
  using nlohmann::json;
  json layouts = json::array();
  for (const auto& e : c.layouts) {
    json terms = json::array();
    for (const auto& t : e.terms)
      terms.push_back({{"key", t.key}, {"label", t.label}, {"measured_s", t.measured_s}, {"predicted_before_s", t.before_s},
                       {"predicted_after_s", t.after_s}, {"error_before", t.error_before()},
                       {"error_after", t.error_after()}});
    layouts.push_back({{"label", e.label}, {"in_sample", e.in_sample}, {"terms", terms}});
  }
  json checks = json::array();
  for (const auto& k : c.checks)
    checks.push_back({{"field", k.field}, {"layout", k.layout}, {"terms", k.terms}, {"measured_s", k.measured_s},
                      {"predicted_before_s", k.before_s}, {"predicted_after_s", k.after_s}, {"improves", k.improves()},
                      {"text", k.text()}});
  return {{"fit", fit_json(c.fit)}, {"cost_file", c.cost_file},
          {"cluster_file", c.cluster_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.cluster_file)}, {"layouts", layouts}, {"link_checks", checks}};
}

std::vector<HtmlSection> calibration_sections(const Calibration& c) {
  std::vector<HtmlSection> out = {fit_section(c.fit)};
  out.back().lines.push_back("written to " + c.cost_file);
  if (!c.cluster_file.empty()) out.back().lines.push_back("fitted latencies written to " + c.cluster_file);
  for (const auto& k : c.checks) out.back().lines.push_back(k.text());
  for (size_t i = 0; i < c.layouts.size(); ++i) {
    const LayoutErrors& e = c.layouts[i];
    HtmlSection sec{"calibration-errors-" + std::to_string(i), "Prediction error, " + heading(e),
                    {"predicted / measured - 1, before and after the fit"}, HtmlTable{}};
    sec.table->header = {"term", "measured, ms", "before, ms", "error", "after, ms", "error"};
    for (const auto& t : e.terms)
      sec.table->rows.push_back({t.label, ms(t.measured_s), ms(t.before_s), pct(t.error_before()), ms(t.after_s),
                                 pct(t.error_after())});
    out.push_back(sec);
  }
  return out;
}

}  // namespace trident
