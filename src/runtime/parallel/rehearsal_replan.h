// Back to the plan: the full-scale plan made again with what transfers from a rehearsal's
// self-calibration. What transfers is the correction of each link kind's collective share,
// fitted over before (the shared memory inside an emulated host stands for the plan's link inside
// a node, the shaped link between hosts for its network): the plan's share of that link times the
// ratio, at most 1, once the fitted share has predicted the layout it was not fitted on better
// than before (a share fitted to waits for descheduled ranks on a loaded machine does not). The CPU's compute and memory shares do not transfer (a CPU core's GEMM share
// says nothing of a GPU's). The plan's own layout is estimated with both tables, and the search
// is run again over every layout with both, so the report says whether the recommendation moves.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_spec.h"
#include "plan/estimate.h"
#include "report/html_page.h"
#include "runtime/parallel/rehearsal_calibration.h"
#include "runtime/parallel/rehearsal_fit.h"

namespace trident::parallel {

struct LinkTransfer {
  std::string where;  // "inside a host", "between hosts"
  std::string rehearsal_field, plan_field;
  double rehearsal_before = 0, rehearsal_after = 0, plan_before = 0, plan_after = 0;
  bool applied = false;
  std::string note;  // why not applied, or clamped
  double ratio() const { return rehearsal_before > 0 ? rehearsal_after / rehearsal_before : 1; }
};

struct Replan {
  std::vector<LinkTransfer> transfers;
  CostTable before, after;
  std::optional<plan::Estimate> plan_before, plan_after;  // the plan's own layout
  std::optional<plan::Estimate> best_before, best_after;  // the search's best
  int64_t feasible_before = 0, feasible_after = 0;
  bool changed = false;
  std::string sentence;  // whether the recommendation changes, and why
};

// `checks`: the fitted link shares tested out of sample (rehearsal_calibration.h); a share goes
// back to the plan only when its check came closer.
Replan replan(const RunSpec& plan, const CostFit& fit, const std::vector<LinkCheck>& checks, double overhead_bytes);

std::string replan_text(const Replan& r);
nlohmann::json replan_json(const Replan& r);
HtmlSection replan_section(const Replan& r);

}  // namespace trident::parallel
