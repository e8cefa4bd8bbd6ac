// What a rehearsal says about the full-scale plan (see rehearsal_summary.h).
#include "rehearse/rehearsal_summary.h"

#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/step_terms.h"
#include "plan/estimate.h"
#include "rehearse/rehearsal_shape.h"

namespace trident::rehearse {

namespace {

struct CommTerm {
  std::string key;    // the verdict's term
  std::string label;  // as the sentence names it: "TP"
  Dim dim;
  double plan::TimeBreakdown::*time;
};

// The communication terms of the step (core/step_terms.h): each the one named as its dimension.
const std::vector<CommTerm>& comm_terms() {
  static const std::vector<CommTerm> v = [] {
    std::vector<CommTerm> out;
    for (const StepTerm& t : step_time_terms())
      if (t.dim && t.planned && std::string(t.key) == dimension(*t.dim).name) {
        std::string label = t.key;
        for (char& ch : label) ch = char(std::toupper(static_cast<unsigned char>(ch)));
        out.push_back({t.key, label, *t.dim, t.planned});
      }
    return out;
  }();
  return v;
}

double comm_share(const plan::Estimate& e, const Layout& L) {
  double s = 0;
  for (const CommTerm& c : comm_terms())
    if (L.size(c.dim) > 1) s += e.time.*c.time;
  return e.time.step > 0 ? s / e.time.step : 0;
}

// "TP and PP", "TP, PP and DP".
std::string listed(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return s;
}

}  // namespace

std::string full_scale_sentence(const RunSpec& plan, const RehearsalShape& shape, const Verdict& verdict,
                                const Replan* replan) {
  const plan::Estimate before = replan && replan->plan_before ? *replan->plan_before : plan::estimate(plan, 0.0);
  const Layout& P = plan.layout;
  std::string parts;
  std::vector<std::string> held, missed, untested;
  for (const CommTerm& c : comm_terms()) {
    if (P.size(c.dim) == 1) continue;
    parts += fmt::format("{}{} {:.1f}%", parts.empty() ? "" : ", ", c.label, 100 * before.time.*c.time / before.time.step);
    const TermVerdict* t = nullptr;
    for (const auto& x : verdict.terms)
      if (x.key == c.key) t = &x;
    // A crossing of nodes the rehearsal did not reproduce qualifies what it measured.
    const bool plan_crosses = crosses_hosts(P, c.dim, plan.cluster.gpus_per_nvlink_domain());
    const std::string crossing =
        plan_crosses == crosses_hosts(shape.run.layout, c.dim, shape.ranks_per_host) ? ""
        : plan_crosses ? "in a host here, so not across nodes as planned"
                       : "across hosts here, inside a node in the plan";
    if (!t || !t->exercised || !t->predicted_s) {
      untested.push_back(fmt::format("{} ({} 1 here)", c.label, to_string(c.dim)));
    } else if (!t->holds) {
      missed.push_back(fmt::format("{} ({:.2f}x its prediction{}{})", c.label,
                                   *t->predicted_s > 0 ? t->median_s / *t->predicted_s : 0.0,
                                   crossing.empty() ? "" : ", ", crossing));
    } else {
      held.push_back(crossing.empty() ? c.label : fmt::format("{} ({})", c.label, crossing));
    }
  }
  if (parts.empty())
    return fmt::format("At full scale ({} on {}) the plan has no parallel communication to check.", P.describe(),
                       plan.cluster.describe());
  std::string s = fmt::format("At full scale ({}, {} nodes) the planner puts communication at {:.1f}% of the {:.2f} s step "
                              "({}); this rehearsal",
                              P.describe(), plan.cluster.nodes, 100 * comm_share(before, P), before.time.step, parts);
  if (!verdict.predicted) return s + " made no prediction to compare, so it says nothing about that share.";
  std::vector<std::string> says;
  if (!held.empty())
    says.push_back("measured " + listed(held) + fmt::format(" within {:.0f}% of the prediction", 100 * verdict.tolerance));
  if (!missed.empty()) says.push_back("measured " + listed(missed) + " off it");
  if (!untested.empty()) says.push_back("did not exercise " + listed(untested));
  s += " " + listed(says);
  if (missed.empty() && !held.empty())
    s += untested.empty() ? ", so the share holds" : ", so the share holds for what it exercised";
  else if (!missed.empty())
    s += ", so the share does not hold as planned";
  else
    s += ", so the share is the planner's alone";
  if (replan && replan->plan_after) {
    const double after = comm_share(*replan->plan_after, P);
    s += std::abs(after - comm_share(before, P)) > 5e-4
             ? fmt::format("; with the fitted link shares it becomes {:.1f}% (step {:.2f} s)", 100 * after,
                           replan->plan_after->time.step)
             : "; the fitted link shares leave it unchanged";
  }
  return s + ".";
}

}  // namespace trident::rehearse
