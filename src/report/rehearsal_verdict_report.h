// The verdict of a rehearsal (rehearse/rehearsal_verdict.h judges it: each term's median
// over the measured steps beside the planner's prediction, and one sentence saying whether the
// prediction holds) as text, JSON and HTML sections.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/machine_load.h"
#include "report/html_page.h"

namespace trident {

struct TermVerdict {
  std::string key, label;
  double median_s = 0, low_s = 0, high_s = 0;  // over the measured steps
  std::optional<double> predicted_s;
  bool holds = true;
  bool exercised = true;  // false: its dimension is 1 in this run (not judged; holds is null in the JSON)
  std::string note;       // "not exercised (dp 1)"
};

struct Verdict {
  std::vector<TermVerdict> terms;  // the step last
  int64_t steps = 0, warmup = 0;
  double tolerance = 0.25;
  bool predicted = false;  // the report had a prediction
  bool holds = false;
  std::string sentence;
  std::optional<MachineLoad> load_start, load_end;  // probes just before and after the run
};

std::string verdict_text(const Verdict& v);
HtmlSection verdict_section(const Verdict& v, const std::string& id, const std::string& heading);
nlohmann::json verdict_json(const Verdict& v);

// The same rehearsal with its TP groups inside the hosts and across them (compare_tp_across).
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
std::string tp_across_text(const TpAcross& c, const std::string& inside_order, const std::string& across_order);
nlohmann::json tp_across_json(const TpAcross& c);
HtmlSection tp_across_section(const TpAcross& c, const std::string& inside_order, const std::string& across_order);

}  // namespace trident
