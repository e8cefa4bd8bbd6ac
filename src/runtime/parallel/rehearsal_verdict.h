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

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/html_page.h"
#include "runtime/engine/machine_load.h"

namespace trident::parallel {

struct TermVerdict {
  std::string key, label;
  double median_s = 0, low_s = 0, high_s = 0;  // over the measured steps
  std::optional<double> predicted_s;
  bool holds = true;
  std::string note;  // "not in this run (ep 1)"
};

struct Verdict {
  std::vector<TermVerdict> terms;  // the step last
  int64_t steps = 0, warmup = 0;
  double tolerance = 0.25;
  bool predicted = false;  // the report had a prediction
  bool holds = false;
  std::string sentence;
  std::optional<engine::MachineLoad> load_start, load_end;  // probes just before and after the run
};

// Reads train's rehearsal report (rehearsal_json) and judges it. Throws std::runtime_error
// when the report lacks the steps.
Verdict judge_rehearsal(const nlohmann::json& report, double tolerance);

std::string verdict_text(const Verdict& v);
HtmlSection verdict_section(const Verdict& v, const std::string& id, const std::string& heading);
nlohmann::json verdict_json(const Verdict& v);

// The same rehearsal with its TP groups inside the hosts and across them: how much slower the
// crossing layout is, measured (median step, median TP collectives) and predicted, and whether
// the measured factor of the step is within the tolerance of the predicted one.
struct TpAcross {
  struct Row {
    std::string label;
    double inside_s = 0, across_s = 0, predicted_inside_s = 0, predicted_across_s = 0;
    double measured_factor() const { return inside_s > 0 ? across_s / inside_s : 0; }
    double predicted_factor() const { return predicted_inside_s > 0 ? predicted_across_s / predicted_inside_s : 0; }
  };
  std::vector<Row> rows;  // TP collectives, step
  double tolerance = 0.25;
  bool holds = false;
  std::string sentence;
};
TpAcross compare_tp_across(const Verdict& inside, const Verdict& across, double tolerance);
std::string tp_across_text(const TpAcross& c, const std::string& inside_order, const std::string& across_order);
nlohmann::json tp_across_json(const TpAcross& c);
HtmlSection tp_across_section(const TpAcross& c, const std::string& inside_order, const std::string& across_order);

}  // namespace trident::parallel
