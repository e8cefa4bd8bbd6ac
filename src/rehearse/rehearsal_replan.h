// Back to the plan: the full-scale plan made again with what transfers from a rehearsal's
// self-calibration. What transfers is the correction of each link kind's collective share,
// fitted over before (the shared memory inside an emulated host stands for the plan's link inside
// a node, the shaped link between hosts for its network): the plan's share of that link times the
// ratio, at most 1, once the fitted share has predicted the layout it was not fitted on better
// than before (a share fitted to waits for descheduled ranks on a loaded machine does not). The CPU's compute and memory shares do not transfer (a CPU core's GEMM share
// says nothing of a GPU's). The plan's own layout is estimated with both tables, and the search
// is run again over every layout with both, so the report says whether the recommendation moves.
#pragma once

#include <vector>

#include "core/run_spec.h"
#include "rehearse/rehearsal_calibration.h"
#include "rehearse/rehearsal_fit.h"
#include "report/rehearsal_replan_report.h"

namespace trident::rehearse {

// `checks`: the fitted link shares tested out of sample (rehearsal_calibration.h); a share goes
// back to the plan only when its check came closer.
Replan replan(const RunSpec& plan, const CostFit& fit, const std::vector<LinkCheck>& checks, double overhead_bytes);

}  // namespace trident::rehearse
