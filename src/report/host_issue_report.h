// The host issue floor of a plan (plan/host_issue.h) as the breakdown's text line and its JSON:
// the slowest stage's launches per micro-batch, the CUDA graphs that replace kernels, the host
// time against the GPU's and what is exposed per step.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/estimate.h"

namespace trident::plan {

// "" when the stack does not issue from Python (no floor to speak of).
std::string host_issue_text(const Estimate& e);
// null when the stack does not issue from Python.
nlohmann::json host_issue_json(const Estimate& e);

}  // namespace trident::plan
