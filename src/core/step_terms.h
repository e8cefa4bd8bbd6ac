// The step-time terms, one row each: what the planner computes (a field of TimeBreakdown), what
// the runtime measures (a field of PhaseTimes), the dimension that exercises it, and the names
// the reports, the JSON, the rehearsal's verdict and fit and the charts give it. Those writers
// iterate this table, so a new term is a row here plus its formula (the planner's field and the
// runtime's timer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/phase_times.h"

namespace trident {

struct RunSpec;

// The planner's step time of one run, by term (plan/estimate.cpp fills it).
struct TimeBreakdown {
  double step = 0;
  double compute = 0;    // m x the slowest stage's forward + backward compute (recompute included)
  double launch = 0;     // of compute: m x the slowest stage's kernel calls x kernel_launch_us
  double tp_comm = 0;    // m x its TP collectives
  double pp_comm = 0;    // m x its pipeline sends
  double bubble = 0;     // fill and drain of the pipeline
  double cp_comm = 0;    // m x its ring exchanges not hidden behind attention
  double ep_comm = 0;    // m x its MoE all-to-alls
  double ep_wait = 0;    // m x its wait in them for the most loaded ep rank (moe_load_imbalance)
  double host = 0;       // m x the slowest stage's wait for the host to issue its kernels (plan/host_issue.h)
  double dp_comm = 0;    // exposed gradient reduction (ZeRO-3: and weight gathers) + tied-embedding sync
                         // + the expert gradients' reduction over edp
  double zero_gather = 0;  // of dp_comm: the ZeRO weight all-gathers' exposed part
  double tp_hidden = 0;  // m x the slowest stage's TP time hidden behind compute (its slowdown is in tp_comm)
  double pp_hidden = 0;
  double cp_hidden = 0;  // m x the ring exchange hidden behind attention
  double optimizer = 0;
};

struct StepTerm {
  const char* key;    // the verdict's, the fit's and the palette's key: "tp", "ep_wait"
  const char* label;  // the verdict's and the calibration's label: "TP collectives"
  const char* share_label;  // the rehearsal's share-table label ("bubble idle"); nullptr: no share row
  const char* share_key;    // its key in the rehearsal's JSON shares and terms_s ("cp_exchange")
  const char* phase_key;    // the rehearsal's per-rank JSON key ("cp_exchange_s")
  const char* plan_key;     // the key in plan --json's time_s ("cp_comm"); nullptr: not there
  // The dimension whose size 1 leaves the term at 0 (the verdict does not judge it there); none
  // for compute and the optimizer.
  std::optional<Dim> dim;
  bool (*shown)(const RunSpec&);  // whether the share table lists it for this run; nullptr: always
  double TimeBreakdown::*planned;  // nullptr: the planner does not predict it
  double PhaseTimes::*measured;
  // A detail of another term, counted inside it ("of it ZeRO gathers"): not a term of the step's sum.
  const char* part_of;
  // The runtime times it inside another term's phase (the optimizer inside compute): the
  // verdict takes it out of that term, the share table adds it back in.
  const char* timed_inside;
  bool fitted;       // the rehearsal's cost fit has a field for it (the EP terms have none)
  const char* fill;  // its chart colour (report/palette.h); nullptr: drawn as the term it is part of
  // Its name in the planner's step line, the comparison table and the rationale ("TP"); nullptr for
  // a detail (part_of set).
  const char* step_label = nullptr;
};

// One term of the planner's step with its seconds.
struct PlannedTerm {
  const StepTerm* term;
  double seconds;
};

// The planner's terms that add up to run's step, in the table's order: each term of the step
// (planned, not a detail) that the run has (its `shown` predicate) or that is not 0. Every writer
// of the planned step (plan's step line, --compare, the HTML bars) lists these, so a new row
// reaches them all.
std::vector<PlannedTerm> planned_step_terms(const RunSpec& run, const TimeBreakdown& t);

// The terms in the order the rehearsal lists them: compute, tp, cp, ep, ep_wait, host, pp, bubble,
// dp, optimizer, then the details (part_of set). "other" (the step less the terms) is not a row.
const std::vector<StepTerm>& step_time_terms();
// The row of `key`, nullptr for another key ("other", "step").
const StepTerm* step_time_term(const std::string& key);
// The row of a share key ("cp_exchange"), nullptr for another.
const StepTerm* step_time_term_by_share_key(const std::string& share_key);

}  // namespace trident
