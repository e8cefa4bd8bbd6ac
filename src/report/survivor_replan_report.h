// `trident replan`'s report: the layout for the GPUs that are left beside the plan it replaces,
// the batch policy and learning-rate rule, the slowdown, every figure with its inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/survivor_replan.h"

namespace trident {

std::string survivor_replan_text(const plan::SurvivorPlan& r);
nlohmann::json survivor_replan_json(const plan::SurvivorPlan& r);

}  // namespace trident
