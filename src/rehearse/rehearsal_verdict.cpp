// The verdict of a rehearsal (see rehearsal_verdict.h).
#include "rehearse/rehearsal_verdict.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/step_terms.h"

namespace trident::rehearse {

namespace {

double median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

double at(const nlohmann::json& r, const char* k) { return r.value(k, 0.0); }

// A term of one step and rank from the report's per-step JSON, less the terms the runtime times
// inside it (compute's optimizer: a term of its own here).
double measured(const StepTerm& term, const nlohmann::json& rank) {
  double x = at(rank, term.phase_key);
  for (const StepTerm& in : step_time_terms())
    if (in.timed_inside && std::string(in.timed_inside) == term.key) x -= at(rank, in.phase_key);
  return x;
}

// The verdict's terms: the step's (core/step_terms.h, their details left to the report), then
// "other", the step less the phases timed.
std::vector<TermVerdict> verdict_terms() {
  std::vector<TermVerdict> v;
  for (const StepTerm& t : step_time_terms())
    if (!t.part_of) v.push_back({t.key, t.label});
  v.push_back({"other", "other (host work)"});
  return v;
}

// Median and range over the measured steps of a per-step value.
void summarise(const std::vector<double>& per_step, TermVerdict& t) {
  t.median_s = median(per_step);
  t.low_s = per_step.empty() ? 0 : *std::min_element(per_step.begin(), per_step.end());
  t.high_s = per_step.empty() ? 0 : *std::max_element(per_step.begin(), per_step.end());
}

void judge(TermVerdict& t, double tolerance, double predicted_step) {
  if (!t.predicted_s) return;
  const double diff = std::abs(t.median_s - *t.predicted_s);
  t.holds = diff <= tolerance * *t.predicted_s || diff <= 0.05 * predicted_step;
}

std::string ms(double s) { return fmt::format("{:.2f} ms", s * 1e3); }

std::string miss_text(const TermVerdict& t) {
  const double p = *t.predicted_s;
  const std::string factor = p > 0 ? fmt::format("{:.2f}x the prediction", t.median_s / p) : "predicted 0";
  return fmt::format("{} {} ({} measured, {} predicted, off by {})", t.label, factor, ms(t.median_s), ms(p),
                     ms(std::abs(t.median_s - p)));
}

}  // namespace

Verdict judge_rehearsal(const nlohmann::json& report, double tolerance) {
  Verdict v;
  v.tolerance = tolerance;
  if (!report.contains("steps") || !report["steps"].is_array() || report["steps"].empty())
    throw std::runtime_error("the rehearsal report has no steps");
  const auto& steps = report["steps"];
  v.warmup = report.value("warmup_steps", int64_t(0));
  v.steps = int64_t(steps.size()) - v.warmup;
  const nlohmann::json& pred = report.contains("predicted") ? report["predicted"] : nlohmann::json();
  v.predicted = pred.is_object() && pred.contains("terms_s");
  const double pred_step = v.predicted ? pred.value("step_s", 0.0) : 0.0;
  const auto& layout = report["layout"];
  double pred_listed = 0;
  for (TermVerdict t : verdict_terms()) {
    const StepTerm* d = step_time_term(t.key);  // nullptr: "other"
    std::vector<double> per_step;
    for (size_t s = size_t(std::max<int64_t>(0, v.warmup)); s < steps.size(); ++s) {
      double sum = 0;
      for (const auto& r : steps[s]["ranks"]) sum += d ? measured(*d, r) : at(r, "other_s");
      per_step.push_back(sum / double(std::max<size_t>(1, steps[s]["ranks"].size())));
    }
    summarise(per_step, t);
    if (v.predicted && d && d->planned)
      t.predicted_s = pred["terms_s"].value(d->share_key, 0.0), pred_listed += *t.predicted_s;
    // A dimension at size 1 is not exercised: its terms are shown, not judged (0 against 0 says nothing).
    if (d && d->dim && layout.value(dimension(*d->dim).name, 1) == 1) {
      t.note = std::string("not exercised (") + dimension(*d->dim).name + " 1)";
      t.exercised = false;
    }
    v.terms.push_back(t);
  }
  for (auto& t : v.terms)
    if (t.key == "other" && v.predicted)  // the step less the terms: rounding leaves 1e-17 s where nothing is left
      t.predicted_s = pred_step - pred_listed > 1e-9 * pred_step ? pred_step - pred_listed : 0.0;
  TermVerdict step{"step", "step (slowest rank)"};
  std::vector<double> per_step;
  for (size_t s = size_t(std::max<int64_t>(0, v.warmup)); s < steps.size(); ++s) {
    double mx = 0;
    for (const auto& r : steps[s]["ranks"]) mx = std::max(mx, r.value("total_s", 0.0));
    per_step.push_back(mx);
  }
  summarise(per_step, step);
  if (v.predicted) step.predicted_s = pred_step;
  v.terms.push_back(step);

  if (!v.predicted) {
    v.sentence = "No verdict: the report has no prediction (" + report.value("prediction_missing", std::string("none")) + ").";
    return v;
  }
  std::vector<const TermVerdict*> misses;
  for (auto& t : v.terms) {
    if (!t.exercised) continue;
    judge(t, tolerance, pred_step);
    if (!t.holds) misses.push_back(&t);
  }
  std::sort(misses.begin(), misses.end(), [](const TermVerdict* a, const TermVerdict* b) {
    return std::abs(a->median_s - *a->predicted_s) > std::abs(b->median_s - *b->predicted_s);
  });
  v.holds = misses.empty();
  const std::string rule = fmt::format("within {:.0f}% of its prediction or 5% of the predicted step", 100 * tolerance);
  std::string unexercised;
  for (const auto& t : v.terms)
    if (!t.exercised) unexercised += (unexercised.empty() ? "" : ", ") + t.label;
  if (v.holds) {
    v.sentence = "The prediction holds: every term " + std::string(unexercised.empty() ? "" : "exercised ") + "is " + rule +
                 (unexercised.empty() ? "." : " (" + unexercised + ": not exercised).");
  } else {
    v.sentence = "The prediction does not hold (each term must be " + rule + "): ";
    for (size_t i = 0; i < misses.size(); ++i) v.sentence += (i ? "; " : "") + miss_text(*misses[i]);
    v.sentence += ".";
  }
  return v;
}

namespace {
const TermVerdict* term(const Verdict& v, const std::string& key) {
  for (const auto& t : v.terms)
    if (t.key == key) return &t;
  return nullptr;
}
}  // namespace

TpAcross compare_tp_across(const Verdict& inside, const Verdict& across, double tolerance) {
  TpAcross c;
  c.tolerance = tolerance;
  for (const auto& [key, label] : {std::pair{"tp", "TP collectives"}, std::pair{"step", "step (slowest rank)"}}) {
    const TermVerdict *a = term(inside, key), *b = term(across, key);
    if (!a || !b) continue;
    c.rows.push_back({label, a->median_s, b->median_s, a->predicted_s.value_or(0), b->predicted_s.value_or(0)});
  }
  if (c.rows.size() < 2 || !inside.predicted || !across.predicted) {
    c.sentence = "No comparison: a run has no prediction.";
    return c;
  }
  const TpAcross::Row& step = c.rows.back();
  const double m = step.measured_factor(), p = step.predicted_factor();
  c.holds = p > 0 && std::abs(m / p - 1) <= tolerance;
  c.sentence = fmt::format("With TP across the hosts the step is {:.2f}x the step with TP inside them, measured; the "
                           "planner predicts {:.2f}x for these links: {} (the measured factor must be within {:.0f}% "
                           "of the predicted one; measured / predicted = {:.2f}).",
                           m, p, c.holds ? "the prediction holds" : "the prediction does not hold", 100 * tolerance,
                           p > 0 ? m / p : 0.0);
  return c;
}

}  // namespace trident::rehearse
