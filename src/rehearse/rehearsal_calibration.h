// The rehearsal's self-calibration, end to end: the cost table fitted on the first layout's
// measured terms (rehearsal_fit.h), written as a [cost] file, read back the way --cost reads one,
// and every rehearsed layout predicted again with it: per term, the prediction error before and
// after the fit, of the layout fitted on and of the others (out of sample: the fit never saw
// their measurements).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rehearse/rehearsal_fit.h"
#include "rehearse/rehearsal_verdict.h"
#include "report/rehearsal_calibration_report.h"

namespace trident::rehearse {

struct CalibrationRun {
  std::string label;
  RunSpec run;  // as rehearsed (before prediction_run)
  const Verdict* verdict = nullptr;
};

// The verdict's measured medians by term key, for fit_cost (terms the run does not have left out).
std::map<std::string, double> measured_terms(const Verdict& v);

// Fits on runs[0], writes `cost_file` (and, when a link latency was fitted, `fitted_cluster_file`:
// `cluster_file` with it), predicts each run before and after with the planner.
Calibration calibrate(const std::vector<CalibrationRun>& runs, const std::string& cluster_file, int64_t cores,
                      const std::string& cost_file, const std::string& fitted_cluster_file);

}  // namespace trident::rehearse
