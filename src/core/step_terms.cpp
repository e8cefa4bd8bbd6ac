#include "core/step_terms.h"

#include "core/run_spec.h"

namespace trident {

namespace {

bool cp_on(const RunSpec& r) { return r.layout.cp > 1; }
bool ep_on(const RunSpec& r) { return r.layout.ep > 1; }
bool zb_h1(const RunSpec& r) { return r.exec.schedule == ScheduleKind::ZeroBubbleH1; }  // postponed weight gradients
bool zero_gathers(const RunSpec& r) { return r.exec.zero >= 1 && r.layout.dp > 1; }
bool never(const RunSpec&) { return false; }
bool python_host(const RunSpec& r) { return python_issued(r.exec); }  // plan/host_issue.h

using T = TimeBreakdown;
using P = PhaseTimes;

// Colours: Paul Tol's "muted" scheme and a pale grey for the idle (see report/palette.h).
const std::vector<StepTerm> kTerms = {
    // key, label, share label, share key, per-rank key, plan key, dimension, shown, planned, measured,
    // part of, timed inside, fitted, fill, step label
    {"compute", "compute", "compute (+optimizer)", "compute", "compute_s", "compute", std::nullopt, nullptr,
     &T::compute, &P::compute, nullptr, nullptr, true, "#332288", "compute"},
    {"tp", "TP collectives", "TP collectives", "tp", "tp_s", "tp_comm", Dim::TP, nullptr, &T::tp_comm, &P::tp, nullptr,
     nullptr, true, "#DDCC77", "TP"},
    {"cp", "CP ring exchange", "CP ring exchange", "cp_exchange", "cp_exchange_s", "cp_comm", Dim::CP, cp_on,
     &T::cp_comm, &P::cp, nullptr, nullptr, true, "#88CCEE", "CP"},
    // The collective with every rank present, against the planner's; apart, the wait for slower
    // peers (the planner's ranks are even). No cost field of their own: not fitted.
    {"ep", "EP all-to-all", "EP all-to-all", "ep_alltoall", "ep_alltoall_s", "ep_comm", Dim::EP, ep_on, &T::ep_comm,
     &P::ep, nullptr, nullptr, false, "#AA4499", "EP all-to-all"},
    {"ep_wait", "EP wait (peers)", "EP wait (peers)", "ep_wait", "ep_wait_s", "ep_wait", Dim::EP, ep_on, &T::ep_wait,
     &P::ep_wait, nullptr, nullptr, false, "#882255", "EP wait"},
    // The GPU waiting for a Python stack's host to issue the kernels; timed inside compute by a
    // runtime (the GPU idles between its kernels).
    {"host", "host issue floor", "host issue wait", "host_issue", "host_issue_s", "host_issue", std::nullopt,
     python_host, &T::host, &P::host, nullptr, "compute", false, "#117733", "host issue"},
    {"pp", "PP transfers", "PP transfers", "pp", "pp_s", "pp_comm", Dim::PP, nullptr, &T::pp_comm, &P::pp, nullptr,
     nullptr, true, "#CC6677", "PP"},
    {"bubble", "bubble", "bubble idle", "bubble", "bubble_s", "bubble", Dim::PP, nullptr, &T::bubble, &P::bubble,
     nullptr, nullptr, true, "#DDDDDD", "bubble"},
    {"dp", "DP exposed", "DP exposed", "dp_exposed", "dp_exposed_s", "dp_comm", Dim::DP, nullptr, &T::dp_comm,
     &P::dp_exposed, nullptr, nullptr, true, "#44AA99", "DP"},
    {"optimizer", "optimizer", nullptr, "optimizer", "optimizer_s", "optimizer", std::nullopt, nullptr, &T::optimizer,
     &P::optimizer, nullptr, "compute", true, "#999933", "optimizer"},
    // Details, each inside a term above.
    {"weight_grad", "W passes", "  of which W passes", "weight_grad", "weight_grad_s", nullptr, std::nullopt, zb_h1,
     nullptr, &P::weight, "compute", nullptr, false, nullptr},
    {"cp_attention", "ring attention blocks", nullptr, "cp_attention", "cp_attention_s", nullptr, Dim::CP, never,
     nullptr, &P::cp_attention, "compute", nullptr, false, nullptr},
    // The planner's bubble is the pipeline's fill and drain; at the step's end the drain shows as
    // the wait in the gradient norm's all-reduce, so that wait is counted there (and listed).
    {"norm_wait", "norm all-reduce wait", "  of it in the norm all-reduce", "norm_wait", "norm_wait_s", nullptr,
     std::nullopt, nullptr, nullptr, &P::norm_wait, "bubble", nullptr, false, nullptr},
    {"zero_gathers", "ZeRO gathers", "  of it ZeRO gathers", "zero_gathers", "zero_gather_s", nullptr, Dim::DP,
     zero_gathers, &T::zero_gather, &P::zero_gather, "dp", nullptr, false, nullptr},
};

}  // namespace

const std::vector<StepTerm>& step_time_terms() { return kTerms; }

std::vector<PlannedTerm> planned_step_terms(const RunSpec& run, const TimeBreakdown& t) {
  std::vector<PlannedTerm> out;
  for (const StepTerm& term : kTerms) {
    if (!term.planned || term.part_of) continue;
    const double v = t.*term.planned;
    if (!term.shown || term.shown(run) || v != 0) out.push_back({&term, v});
  }
  return out;
}

// The step less every term the runtime times apart (a detail is inside its term, a term timed
// inside another is in that one's phase).
double PhaseTimes::other() const {
  double s = total;
  for (const StepTerm& term : kTerms)
    if (!term.part_of && !term.timed_inside) s -= this->*term.measured;
  return s;
}

const StepTerm* step_time_term(const std::string& key) {
  for (const StepTerm& t : kTerms)
    if (key == t.key) return &t;
  return nullptr;
}

const StepTerm* step_time_term_by_share_key(const std::string& share_key) {
  for (const StepTerm& t : kTerms)
    if (share_key == t.share_key) return &t;
  return nullptr;
}

}  // namespace trident
