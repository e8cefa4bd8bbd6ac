// The rehearsal's self-calibration (rehearse/rehearsal_calibration.h runs it) as text, JSON
// and HTML sections: the fit, the [cost] file it wrote, and per layout each term's prediction error
// before and after the fit.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/html_page.h"
#include "report/rehearsal_fit_report.h"

namespace trident {

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

struct Calibration {
  CostFit fit;
  std::string cost_file;
  std::string cluster_file;  // the prediction's cluster with the fitted latencies ("" when none was fitted)
  std::vector<LayoutErrors> layouts;
  std::vector<LinkCheck> checks;  // one per fitted link share
};

std::string calibration_text(const Calibration& c);
nlohmann::json calibration_json(const Calibration& c);
std::vector<HtmlSection> calibration_sections(const Calibration& c);

}  // namespace trident
