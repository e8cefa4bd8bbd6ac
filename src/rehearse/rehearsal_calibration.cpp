// The rehearsal's self-calibration end to end (see rehearsal_calibration.h).
#include "rehearse/rehearsal_calibration.h"

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/options.h"
#include "core/output_path.h"
#include "core/step_terms.h"
#include "rehearse/rehearsal_link.h"

namespace trident::rehearse {

namespace {

// The terms the planner predicts, the rehearsal measures and the fit has a field for, and the
// step ("other" is what is left of each).
bool fitted(const std::string& key) {
  const StepTerm* t = step_time_term(key);
  return key == "step" || (t && t->fitted && !t->part_of);
}

LayoutErrors errors_of(const CalibrationRun& r, bool in_sample, const Prediction& before, const Prediction& after) {
  LayoutErrors e{r.label, in_sample, {}};
  for (const auto& t : r.verdict->terms) {
    if (!fitted(t.key) || !t.note.empty()) continue;
    TermError te{t.key, t.label, t.median_s, predicted_term(before, t.key), predicted_term(after, t.key)};
    if (te.measured_s > 0 || te.before_s > 0) e.terms.push_back(te);
  }
  return e;
}

// The prediction of `run` with the table of `cost_file` over the prediction's own table, read
// as --cost reads a file (the fitted file holds every field, so its values are the ones used).
Prediction predict_with_file(const RunSpec& run, const std::string& cluster_file, int64_t cores,
                             const std::string& cost_file) {
  RunSpec r = prediction_run(run, cluster_file, cores, "");
  Problems p;
  if (const auto text = read_settings_file(cost_file, "cost table", "--cost", "cost-file", p))
    apply_cost_toml(*text, cost_file, r.cluster.gpu, *r.cost, p);
  p.throw_if_any();
  r.cost->source = cost_file;
  return prediction_of(r);
}

double sum_of(const std::vector<std::string>& keys, const std::function<double(const std::string&)>& value) {
  double s = 0;
  for (const auto& k : keys) s += value(k);
  return s;
}

// Each fitted link share against the second layout's terms that depend on it alone.
std::vector<LinkCheck> link_checks(const CostFit& fit, const std::vector<CalibrationRun>& runs,
                                   const std::string& cluster_file, int64_t cores, const Prediction& before,
                                   const Prediction& after) {
  std::vector<LinkCheck> out;
  for (const auto& s : fit.steps) {
    if (!s.fitted || (s.field != fit.intra_field && s.field != fit.inter_field)) continue;
    LinkCheck c;
    c.field = s.field;
    if (runs.size() > 1) {
      const auto measured = measured_terms(*runs[1].verdict);
      const std::string other = s.field == fit.intra_field ? fit.inter_field : fit.intra_field;
      c.layout = runs[1].label;
      c.terms = link_terms_of(prediction_run(runs[1].run, cluster_file, cores, ""), s.field, other, measured);
      c.measured_s = sum_of(c.terms, [&](const std::string& k) { return measured.at(k); });
      c.before_s = sum_of(c.terms, [&](const std::string& k) { return predicted_term(before, k); });
      c.after_s = sum_of(c.terms, [&](const std::string& k) { return predicted_term(after, k); });
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::map<std::string, double> measured_terms(const Verdict& v) {
  std::map<std::string, double> m;
  for (const auto& t : v.terms)
    // The EP terms are not fitted (no cost field of their own); its wait is the peers' skew.
    if (t.note.empty() && t.key != "step" && fitted(t.key))
      m[t.key] = t.median_s;
  return m;
}

Calibration calibrate(const std::vector<CalibrationRun>& runs, const std::string& cluster_file, int64_t cores,
                      const std::string& cost_file, const std::string& fitted_cluster_file) {
  Calibration c;
  c.cost_file = cost_file;
  c.fit = fit_cost(prediction_run(runs.at(0).run, cluster_file, cores, ""), measured_terms(*runs[0].verdict));
  std::vector<std::string> comments = {
      "Cost table fitted by `trident rehearse` to the rehearsal of " + runs[0].label + " on " + cluster_file + ".",
      "Fitted (value' = value x S / (M - F), see verdict.json's calibration):"};
  for (const auto& s : c.fit.steps)
    comments.push_back(fmt::format("  {} {:.6g} -> {:.6g}{}", s.field, s.before, s.after, s.fitted ? "" : " (" + s.note + ")"));
  comments.push_back("The other values are the prediction's table before the fit (" + c.fit.before.source + ").");
  write_text_atomically(cost_file, cost_toml(c.fit.after, comments));
  std::string after_cluster = cluster_file;
  if (!c.fit.cluster_after.empty()) {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& [key, us] : c.fit.cluster_after) keys.emplace_back(key, fmt::format("{:.3f}", us));
    write_text_atomically(fitted_cluster_file,
                          "# " + cluster_file + " with the link latencies `trident rehearse` fitted to " + runs[0].label +
                              " (see verdict.json's calibration)\n" + override_toml(read_text_file(cluster_file), keys, {}));
    c.cluster_file = after_cluster = fitted_cluster_file;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const Prediction before = predict(runs[i].run, cluster_file, cores, "");
    const Prediction after = predict_with_file(runs[i].run, after_cluster, cores, cost_file);
    c.layouts.push_back(errors_of(runs[i], i == 0, before, after));
    if (i == runs.size() - 1) c.checks = link_checks(c.fit, runs, cluster_file, cores, before, after);
  }
  return c;
}

}  // namespace trident::rehearse
