// Back to the plan (rehearse/rehearsal_replan.h makes the plan again with what transfers
// from a rehearsal's self-calibration) as text, JSON and an HTML section.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost_table.h"
#include "plan/estimate.h"
#include "report/html_page.h"

namespace trident {

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

std::string replan_text(const Replan& r);
nlohmann::json replan_json(const Replan& r);
HtmlSection replan_section(const Replan& r);

}  // namespace trident
