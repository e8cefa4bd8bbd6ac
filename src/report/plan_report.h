// Text and JSON for estimates, lint findings and search results (`trident lint`, `trident plan`).
//
// JSON shape of one candidate (scripts depend on it):
//   {"layout": {...}, "fits", "memory_gib": {"weights","gradients","optimizer","activations","overhead",
//    "total","capacity"}, "time_s": {"step","compute","tp_comm","pp_comm","dp_comm","bubble","optimizer"},
//    "tokens_per_s", "tflops_per_gpu", "mfu", "findings": [{"severity","code","message","fix"}]}
// plus "memory_stage" (the most loaded stage) and, with --per-stage, "stages".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/estimate.h"
#include "plan/lint.h"
#include "plan/no_fit.h"
#include "plan/search.h"

namespace trident {

// The cost table an estimate used: every factor, its GPU and where the values came from.
nlohmann::json cost_json(const CostTable& cost);
std::string cost_text(const CostTable& cost);  // one line, "Cost table (h100-80g, built-in): ..."

nlohmann::json layout_json(const RunSpec& run, int64_t micro_batches);
nlohmann::json candidate_json(const RunSpec& run, const plan::Estimate* estimate, const std::vector<plan::Finding>& findings,
                              bool per_stage);
nlohmann::json lint_json(const RunSpec& run, const plan::LintResult& result, bool per_stage);
nlohmann::json plan_json(const plan::SearchResult& result, const std::vector<std::vector<plan::Finding>>& findings,
                         const std::vector<std::string>& rationale, bool per_stage,
                         const plan::NoFitAdvice* no_fit = nullptr);

// The EP all-to-alls of one layer and micro-batch after --moe-ep-overlap, as stage_times charges
// them (the same calls: the layer's compute is the window); the JSON and the text both give them.
plan::Overlapped ep_overlap_of(const plan::Estimate& e);

std::string estimate_text(const plan::Estimate& e, bool per_stage);
std::string findings_text(const std::vector<plan::Finding>& findings);
std::string lint_text(const RunSpec& run, const plan::LintResult& result, bool per_stage);
// The first line of plan, lint and simulate: the software stack the prediction is for, whether
// --stack named it (`given`) or it is the default, and what it sets.
std::string stack_line(const ExecutionSpec& exec, bool given);
std::string plan_text(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                      const plan::SearchResult& result, const std::vector<std::vector<plan::Finding>>& findings,
                      const std::vector<std::string>& rationale, bool per_stage,
                      const plan::NoFitAdvice* no_fit = nullptr);

}  // namespace trident
