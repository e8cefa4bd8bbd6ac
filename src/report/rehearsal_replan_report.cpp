// Back to the plan as text, JSON and HTML (see rehearsal_replan_report.h).
#include "report/rehearsal_replan_report.h"

#include <utility>

#include <fmt/format.h>

#include "core/units.h"
#include "plan/rationale.h"

namespace trident {

namespace {

std::string transfer_text(const LinkTransfer& t) {
  return fmt::format("{}: the rehearsal's {} {:.4f} -> {:.4f} (x {:.4f}): the plan's {} {:.4f} -> {:.4f}{}", t.where,
                     t.rehearsal_field, t.rehearsal_before, t.rehearsal_after, t.ratio(), t.plan_field, t.plan_before,
                     t.plan_after, t.note.empty() ? "" : " (" + t.note + ")");
}

std::string step_text(const plan::Estimate& e) {
  return fmt::format("step {:.3f} s, {:.0f} tokens/s, {:.1f} GiB per GPU", e.time.step, e.tokens_per_s,
                     gib(e.peak_memory().total_bytes()));
}

}  // namespace

std::string replan_text(const Replan& r) {
  std::string out = "\nBack to the plan: the full-scale plan with what transfers from the rehearsal (each link kind's "
                    "fitted share over its share before, times the plan's; the CPU's compute and memory shares do not "
                    "transfer)\n";
  for (const auto& t : r.transfers)
    out += "  " + transfer_text(t) + "\n";
  if (r.plan_before && r.plan_after)
    out += fmt::format("  the plan's layout {}:\n    before: {}\n    after:  {} (the cost table moves no memory)\n",
                       plan::short_layout(*r.plan_before), step_text(*r.plan_before), step_text(*r.plan_after));
  if (r.best_before) out += "  recommended before: " + plan::short_layout(*r.best_before) + ", " + step_text(*r.best_before) + "\n";
  if (r.best_after) out += "  recommended after:  " + plan::short_layout(*r.best_after) + ", " + step_text(*r.best_after) + "\n";
  return out + r.sentence + "\n";
}

nlohmann::json replan_json(const Replan& r) {
  using nlohmann::json;
  auto est = [](const std::optional<plan::Estimate>& e) -> json {
    if (!e) return nullptr;
    return {{"layout", plan::short_layout(*e)}, {"step_s", e->time.step}, {"tokens_per_s", e->tokens_per_s},
            {"peak_memory_bytes", e->peak_memory().total_bytes()}};
  };
  json transfers = json::array();
  for (const auto& t : r.transfers)
    transfers.push_back({{"where", t.where}, {"rehearsal_field", t.rehearsal_field}, {"plan_field", t.plan_field},
                         {"rehearsal_before", t.rehearsal_before}, {"rehearsal_after", t.rehearsal_after},
                         {"ratio", t.ratio()}, {"plan_before", t.plan_before}, {"plan_after", t.plan_after},
                         {"applied", t.applied}, {"note", t.note.empty() ? json(nullptr) : json(t.note)}});
  return {{"transfers", transfers}, {"plan_before", est(r.plan_before)}, {"plan_after", est(r.plan_after)},
          {"best_before", est(r.best_before)}, {"best_after", est(r.best_after)},
          {"feasible_before", r.feasible_before}, {"feasible_after", r.feasible_after}, {"changed", r.changed},
          {"sentence", r.sentence}};
}

HtmlSection replan_section(const Replan& r) {
  HtmlSection sec{"back-to-the-plan", "Back to the plan", {r.sentence}, HtmlTable{}};
  sec.table->header = {"", "layout", "step, s", "tokens/s", "memory per GPU, GiB"};
  for (const auto& [label, e] : {std::pair{"the plan's layout, before", r.plan_before}, {"the plan's layout, after", r.plan_after},
                                 {"recommended before", r.best_before}, {"recommended after", r.best_after}})
    if (e)
      sec.table->rows.push_back({label, plan::short_layout(*e), fmt::format("{:.3f}", e->time.step),
                                 fmt::format("{:.0f}", e->tokens_per_s), fmt::format("{:.1f}", gib(e->peak_memory().total_bytes()))});
  for (const auto& t : r.transfers)
    sec.lines.push_back(transfer_text(t));
  return sec;
}

}  // namespace trident
