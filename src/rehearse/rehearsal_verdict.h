// The verdict of a rehearsal: each term of the step measured beside the planner's prediction for
// this run on these links, and one sentence saying whether the prediction holds.
//
// Measured, from the rehearsal report's JSON (every step and rank): per step the mean over ranks
// of each term (compute without the optimizer, optimizer, TP collectives, CP ring exchange, EP
// all-to-all, PP transfers, bubble, DP exposed, other host work) and the step (the slowest rank);
// the median of those over the steps after warm-up, with the spread (lowest .. highest step).
// A term holds when it is within the tolerance of its prediction (|measured - predicted| <=
// tolerance x predicted) or, for a term that small, within 5% of the predicted step.
#pragma once

#include <nlohmann/json.hpp>

#include "report/rehearsal_verdict_report.h"

namespace trident::rehearse {

// Reads train's rehearsal report (rehearsal_json) and judges it. Throws std::runtime_error
// when the report lacks the steps.
Verdict judge_rehearsal(const nlohmann::json& report, double tolerance);

// The same rehearsal with its TP groups inside the hosts and across them: how much slower the
// crossing layout is, measured (median step, median TP collectives) and predicted, and whether
// the measured factor of the step is within the tolerance of the predicted one.
TpAcross compare_tp_across(const Verdict& inside, const Verdict& across, double tolerance);

}  // namespace trident::rehearse
