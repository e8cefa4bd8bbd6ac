// Self-calibration of a rehearsal: the cost table values its measured terms identify, fitted one
// at a time, each from the terms that depend on it alone (once the earlier ones are fitted):
//
//   hbm_efficiency        the optimizer term (memory-bound: parameters x bytes / bandwidth share)
//   gemm_peak_efficiency  the compute term (GEMMs, with the memory-bound kernels just fitted)
//   the link kind inside an emulated host (shared memory: the bench file's intra link) and the
//   one between hosts (the shaped veth link): every collective or send term (TP, PP, DP, CP)
//   whose prediction depends on that link's share and not on the other's
//
// A term's prediction P at the value e is split into the part S that scales with 1 / e and the
// part F that does not (latency, other work): with P = A / e + F, two estimates, at e and at
// e / 2, give S = A / e = P(e/2) - P(e) and F = P(e) - S. The fitted value makes the prediction
// equal the measured M: e' = e x S / (M - F), printed with e, M, P, S and F so it can be checked
// by hand. M <= F cannot be fitted (the measured term is below what the value cannot change);
// a value above the field's range is clamped to it and says so. The rest of the table (the
// GEMM curve's half dimension, the kernel call cost: one compute term cannot tell them from
// the peak share) is kept, each with the reason. No value is fitted to a constant of the run.
//
// A link whose terms are latency-bound (its share moves under a fifth of their prediction, its
// latency over half: ranks sharing cores wait for their peer to be scheduled) has its latency
// fitted instead of its share: P = S + F with S proportional to the latency (S = 2 (P - P at half
// the latency)), latency' = latency x (M - F) / S, listed in CostFit::cluster_after as the
// [cluster] key it replaces; the share is kept and says why.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "core/run_spec.h"
#include "rehearse/rehearsal_prediction.h"
#include "report/rehearsal_fit_report.h"

namespace trident::rehearse {

// The predicted value of a verdict term (compute, tp, cp, pp, bubble, dp, optimizer, step).
double predicted_term(const Prediction& p, const std::string& key);

// Fits `run`'s cost table (a prediction_run: this machine, its table) to `measured` (verdict key
// -> median seconds). Terms absent from `measured` are not used.
CostFit fit_cost(const RunSpec& run, const std::map<std::string, double>& measured);

// The measured communication terms (tp, cp, pp, dp) whose prediction depends on the cost field
// `field` and not on `other` (the other link kind's field).
std::vector<std::string> link_terms_of(const RunSpec& run, const std::string& field, const std::string& other,
                                       const std::map<std::string, double>& measured);

}  // namespace trident::rehearse
