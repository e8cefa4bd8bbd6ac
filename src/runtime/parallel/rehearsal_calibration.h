// The rehearsal's self-calibration, end to end: the cost table fitted on the first layout's
// measured terms (rehearsal_fit.h), written as a [cost] file, read back the way --cost reads one,
// and every rehearsed layout predicted again with it: per term, the prediction error before and
// after the fit, of the layout fitted on and of the others (out of sample: the fit never saw
// their measurements).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/html_page.h"
#include "runtime/parallel/rehearsal_fit.h"
#include "runtime/parallel/rehearsal_verdict.h"

namespace trident::parallel {

struct TermError {
  std::string key, label;
  double measured_s = 0, before_s = 0, after_s = 0;
  double error_before() const { return measured_s > 0 ? before_s / measured_s - 1 : 0; }
  double error_after() const { return measured_s > 0 ? after_s / measured_s - 1 : 0; }
};

struct LayoutErrors {
  std::string label;  // "tp 2 x pp 2 (order tp-dp-pp)"
  bool in_sample = false;
  std::vector<TermError> terms;  // the step last
};

// A fitted link share tested on a layout it was not fitted on: the terms of that layout that
// depend on it alone, measured against their prediction before and after the fit. Only a share
// that brings them closer is carried back to the plan (rehearsal_replan.h).
struct LinkCheck {
  std::string field;
  std::string layout;              // the layout tested on; empty: none (one layout rehearsed)
  std::vector<std::string> terms;  // empty: no term of it depends on the field alone
  double measured_s = 0, before_s = 0, after_s = 0;
  bool improves() const { return !terms.empty() && std::abs(after_s - measured_s) < std::abs(before_s - measured_s); }
  std::string text() const;  // "tested on ...: 9.99 ms measured, 0.06 -> 21.3 ms predicted: closer"
};

struct CalibrationRun {
  std::string label;
  RunSpec run;  // as rehearsed (before prediction_run)
  const Verdict* verdict = nullptr;
};

struct Calibration {
  CostFit fit;
  std::string cost_file;
  std::vector<LayoutErrors> layouts;
  std::vector<LinkCheck> checks;  // one per fitted link share
};

// The verdict's measured medians by term key, for fit_cost (terms the run does not have left out).
std::map<std::string, double> measured_terms(const Verdict& v);

// Fits on runs[0], writes `cost_file`, predicts each run before and after with the planner.
Calibration calibrate(const std::vector<CalibrationRun>& runs, const std::string& cluster_file, int64_t cores,
                      const std::string& cost_file);

std::string calibration_text(const Calibration& c);
nlohmann::json calibration_json(const Calibration& c);
std::vector<HtmlSection> calibration_sections(const Calibration& c);

}  // namespace trident::parallel
