// Back to the plan (see rehearsal_replan.h).
#include "rehearse/rehearsal_replan.h"

#include <fmt/format.h>

#include "core/units.h"
#include "plan/cost_model.h"
#include "plan/rationale.h"
#include "plan/search.h"

namespace trident::rehearse {

namespace {

double CostTable::*member_named(const std::string& name) {
  for (const auto& f : cost_fields())
    if (name == f.name) return f.member;
  return nullptr;
}

const FitStep* fitted_step(const CostFit& fit, const std::string& field) {
  for (const auto& s : fit.steps)
    if (s.field == field) return &s;
  return nullptr;
}

LinkTransfer transfer(const std::string& where, const std::string& rehearsal_field, LinkKind plan_kind,
                      const CostFit& fit, const std::vector<LinkCheck>& checks, CostTable& table) {
  LinkTransfer t;
  t.where = where;
  t.rehearsal_field = rehearsal_field;
  double CostTable::*pm = plan::link_efficiency_field(plan_kind);
  for (const auto& f : cost_fields())
    if (f.member == pm) t.plan_field = f.name;
  t.plan_before = t.plan_after = table.*pm;
  const FitStep* s = fitted_step(fit, rehearsal_field);
  t.rehearsal_before = fit.before.*member_named(rehearsal_field);
  t.rehearsal_after = fit.after.*member_named(rehearsal_field);
  if (!s || !s->fitted) {
    t.note = "not fitted in the rehearsal: the plan keeps its value";
    for (const auto& [field, why] : fit.kept)
      if (field == rehearsal_field && why.find("latency-bound") != std::string::npos)
        t.note = "not fitted in the rehearsal (its terms are latency-bound there: the link latency was fitted, and a "
                 "CPU rank's latency is its wait for a core, not the target's link): the plan keeps its value";
    return t;
  }
  const LinkCheck* check = nullptr;
  for (const auto& c : checks)
    if (c.field == rehearsal_field) check = &c;
  if (!check || !check->improves()) {
    t.note = (check ? check->text() : rehearsal_field + ": not tested out of sample") + ": not carried to the plan";
    return t;
  }
  t.plan_after = t.plan_before * t.ratio();
  if (t.plan_after > 1) {
    t.note = fmt::format("{:.4g} is above 1: clamped to 1", t.plan_after);
    t.plan_after = 1;
  }
  table.*pm = t.plan_after;
  t.applied = true;
  return t;
}

std::optional<plan::Estimate> with_table(const RunSpec& run, const CostTable& c, double overhead) {
  RunSpec r = run;
  r.cost = c;
  return plan::estimate(r, overhead);
}

std::string why(const Replan& r, double overhead) {
  if (!r.best_before || !r.best_after) return "No layout fits the plan's cluster: nothing to compare.";
  const std::string was = plan::short_layout(*r.best_before), now = plan::short_layout(*r.best_after);
  bool applied = false;
  for (const auto& t : r.transfers) applied = applied || t.applied;
  if (!applied)
    return fmt::format("Nothing goes back to the plan (no fitted link share predicted the layout it was not fitted on "
                       "better): the recommended layout stays {}.", now);
  if (!r.changed)
    return fmt::format("The recommended layout stays {}: with the corrected table its step goes from {:.3f} s to "
                       "{:.3f} s and it is still the fastest of the {} layouts that fit.",
                       now, r.best_before->time.step, r.best_after->time.step, r.feasible_after);
  const auto old_after = with_table(r.best_before->run, r.after, overhead);
  return fmt::format("The recommended layout changes from {} to {}: with the corrected table the new one takes "
                     "{:.3f} s per step against {:.3f} s for the old one, because {} (new less old; negative = new "
                     "faster).",
                     was, now, r.best_after->time.step, old_after->time.step, plan::differences(*r.best_after, *old_after));
}

}  // namespace

Replan replan(const RunSpec& plan_run, const CostFit& fit, const std::vector<LinkCheck>& checks, double overhead) {
  Replan r;
  r.before = r.after = cost_table(plan_run);
  r.transfers.push_back(transfer("inside a host", fit.intra_field, plan_run.cluster.intra.kind, fit, checks, r.after));
  r.transfers.push_back(transfer("between hosts", fit.inter_field, plan_run.cluster.inter.kind, fit, checks, r.after));
  r.after.source = r.before.source + " with the rehearsal's link corrections";
  r.plan_before = with_table(plan_run, r.before, overhead);
  r.plan_after = with_table(plan_run, r.after, overhead);
  plan::SearchSpace space;
  space.use_stack(plan_run.exec);
  const auto& m = plan_run.model;
  const auto& cl = plan_run.cluster;
  const int64_t batch = plan_run.exec.global_batch_size;
  const plan::SearchResult before = plan::search(m, cl, batch, space, 1, overhead, r.before);
  const plan::SearchResult after = plan::search(m, cl, batch, space, 1, overhead, r.after);
  if (!before.best.empty()) r.best_before = before.best.front();
  if (!after.best.empty()) r.best_after = after.best.front();
  r.feasible_before = before.feasible, r.feasible_after = after.feasible;
  r.changed = r.best_before && r.best_after && plan::short_layout(*r.best_before) != plan::short_layout(*r.best_after);
  r.sentence = why(r, overhead);
  return r;
}

}  // namespace trident::rehearse
