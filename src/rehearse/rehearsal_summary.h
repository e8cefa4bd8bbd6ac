// What a rehearsal says about the full-scale plan, in one plain sentence: the plan's predicted
// communication share of its step (each parallel dimension's exposed term), which of those terms
// the rehearsal measured within the tolerance of their prediction, which it measured off, which
// it did not exercise (a dimension at 1 here, or a crossing of hosts it could not emulate), and
// what the fitted link shares (back to the plan) make of the share.
#pragma once

#include <string>
#include <vector>

#include "core/run_spec.h"
#include "report/rehearsal_replan_report.h"
#include "report/rehearsal_shape_report.h"
#include "report/rehearsal_verdict_report.h"

namespace trident::rehearse {

// `verdict`: the first rehearsal run's (the plan's order); `replan`: null when the
// self-calibration failed (then the plan is estimated as planned).
std::string full_scale_sentence(const RunSpec& plan, const RehearsalShape& shape, const Verdict& verdict,
                                const Replan* replan);

}  // namespace trident::rehearse
