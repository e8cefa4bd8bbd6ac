// The self-calibration fit of a rehearsal (rehearse/rehearsal_fit.h fits it) as text, JSON
// and an HTML section: each fitted value beside its inputs, so value' = value x S / (M - F) can be
// redone by hand.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost_table.h"
#include "report/html_page.h"

namespace trident {

struct FitStep {
  std::string field;               // cost table key
  std::string what;                // what it stands for here ("shared memory inside an emulated host")
  std::vector<std::string> terms;  // the terms it is fitted on (verdict keys)
  double before = 0, after = 0;
  double measured_s = 0;   // M: those terms' medians, summed
  double predicted_s = 0;  // P: their prediction at `before`
  double scaling_s = 0;    // S: of P, the part that scales with 1 / value (a latency: with the value)
  double fixed_s = 0;      // F: the rest
  // A link latency (microseconds, a [cluster] key) rather than a share: P = S + F with S
  // proportional to the value, so value' = value x (M - F) / S.
  bool latency = false;
  bool fitted = false;
  std::string note;  // why not fitted, or that it was clamped
};

struct CostFit {
  CostTable before, after;
  std::vector<FitStep> steps;
  std::vector<std::pair<std::string, std::string>> kept;  // field, why the rehearsal does not identify it
  // The rehearsal's link kinds: their efficiency field inside an emulated host and between them.
  std::string intra_field, inter_field;
  // Fitted link latencies: [cluster] key ("intra-latency-us") -> microseconds.
  std::vector<std::pair<std::string, double>> cluster_after;
};

std::string fit_text(const CostFit& f);
nlohmann::json fit_json(const CostFit& f);
HtmlSection fit_section(const CostFit& f);

}  // namespace trident
