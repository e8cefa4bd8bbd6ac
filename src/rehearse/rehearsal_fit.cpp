// The self-calibration fit (see rehearsal_fit.h).
#include "rehearse/rehearsal_fit.h"

#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "plan/cost_model.h"

namespace trident::rehearse {

namespace {

using Member = double CostTable::*;

const CostField& field_of(Member m) {
  for (const auto& f : cost_fields())
    if (f.member == m) return f;
  throw std::logic_error("cost field missing from cost_fields()");
}

double predicted_sum(const RunSpec& r, const std::vector<std::string>& terms) {
  const Prediction p = prediction_of(r);
  double s = 0;
  for (const auto& k : terms) s += predicted_term(p, k);
  return s;
}

// S and F of the terms' prediction at r's value of m (see the header): P(e/2) - P(e), P(e) - S.
std::pair<double, double> split(const RunSpec& r, Member m, const std::vector<std::string>& terms) {
  RunSpec half = r;
  (*half.cost).*m /= 2;
  const double p = predicted_sum(r, terms), s = predicted_sum(half, terms) - p;
  return {s, p - s};
}

bool depends(double scaling_s, double predicted_s) { return scaling_s > 1e-9 * std::max(predicted_s, 1e-9); }

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

// Fits the value of `m` in r's table to the terms' measured sum, and sets it there.
FitStep fit_one(RunSpec& r, Member m, const std::string& what, const std::vector<std::string>& terms,
                const std::map<std::string, double>& measured) {
  const CostField& f = field_of(m);
  FitStep s;
  s.field = f.name, s.what = what, s.terms = terms;
  s.before = s.after = (*r.cost).*m;
  for (const auto& k : terms) s.measured_s += measured.at(k);
  std::tie(s.scaling_s, s.fixed_s) = split(r, m, terms);
  s.predicted_s = s.scaling_s + s.fixed_s;
  if (!depends(s.scaling_s, s.predicted_s)) {
    s.note = "not fitted: the prediction of its terms does not depend on it";
    return s;
  }
  if (s.measured_s <= s.fixed_s) {
    s.note = fmt::format("not fitted: measured {} ms is at or below the {} ms of the prediction this value does not "
                         "change, so no value makes them meet", ms(s.measured_s), ms(s.fixed_s));
    return s;
  }
  double v = s.before * s.scaling_s / (s.measured_s - s.fixed_s);
  if (v > f.max) {
    s.note = fmt::format("{:.4g} is outside its range ({}): clamped to {:g}", v, range_text(f), f.max);
    v = f.max;
  }
  s.after = v;
  s.fitted = true;
  (*r.cost).*m = v;
  return s;
}

// A link's latency as the fit sees it: its [cluster] key and where the run holds it.
struct Latency {
  const char* key;
  bool inter;
  double& of(RunSpec& r) const { return inter ? r.cluster.inter.latency_s : r.cluster.intra.latency_s; }
};

// S and F of the terms' prediction at r's latency (see the header): S = 2 (P - P(latency / 2)), F = P - S.
std::pair<double, double> latency_split(const RunSpec& r, const Latency& l, const std::vector<std::string>& terms) {
  RunSpec half = r;
  l.of(half) /= 2;
  const double p = predicted_sum(r, terms), s = 2 * (p - predicted_sum(half, terms));
  return {s, p - s};
}

// Fits the latency `l` (kept in r's cluster) to the terms' measured sum and sets it there.
FitStep fit_latency(RunSpec& r, const Latency& l, const std::string& what, const std::vector<std::string>& terms,
                    const std::map<std::string, double>& measured) {
  FitStep s;
  s.field = l.key, s.what = what, s.terms = terms, s.latency = true;
  s.before = s.after = l.of(r) * 1e6;
  for (const auto& k : terms) s.measured_s += measured.at(k);
  std::tie(s.scaling_s, s.fixed_s) = latency_split(r, l, terms);
  s.predicted_s = s.scaling_s + s.fixed_s;
  if (s.measured_s <= s.fixed_s) {
    s.note = fmt::format("not fitted: measured {} ms is at or below the {} ms of the prediction the latency does not "
                         "change", ms(s.measured_s), ms(s.fixed_s));
    return s;
  }
  s.after = s.before * (s.measured_s - s.fixed_s) / s.scaling_s;
  s.fitted = true;
  l.of(r) = s.after * 1e-6;
  return s;
}

// Whether the terms' prediction is latency-bound: the part the link's share scales under a fifth
// of it and its latency's part over half. A share fitted to such a term would stand for latency
// (and carry a latency's error to every bandwidth-bound term), so the latency is fitted instead.
bool latency_bound(const RunSpec& r, Member share, const Latency& l, const std::vector<std::string>& terms) {
  const double s = split(r, share, terms).first, lat = latency_split(r, l, terms).first;
  const double p = predicted_sum(r, terms);
  return p > 0 && s < 0.2 * p && lat > 0.5 * p;
}

// The measured communication terms whose prediction depends on `m` and not on `other`.
std::vector<std::string> link_terms(const RunSpec& r, Member m, Member other, const std::map<std::string, double>& measured,
                                    std::string& left_out) {
  std::vector<std::string> terms;
  for (const char* k : {"tp", "cp", "pp", "dp"}) {
    if (!measured.count(k)) continue;
    const auto [s, f] = split(r, m, {k});
    if (!depends(s, s + f)) continue;
    if (other != m) {
      const auto [s2, f2] = split(r, other, {k});
      if (depends(s2, s2 + f2)) {
        left_out += fmt::format("{}{} (depends on both links)", left_out.empty() ? "" : ", ", k);
        continue;
      }
    }
    terms.push_back(k);
  }
  return terms;
}

}  // namespace

std::vector<std::string> link_terms_of(const RunSpec& run, const std::string& field, const std::string& other,
                                       const std::map<std::string, double>& measured) {
  auto member = [](const std::string& name) {
    for (const auto& f : cost_fields())
      if (name == f.name) return f.member;
    throw std::logic_error("no cost field '" + name + "'");
  };
  std::string left_out;
  return link_terms(run, member(field), member(other), measured, left_out);
}

double predicted_term(const Prediction& p, const std::string& key) {
  if (key == "step") return p.step_s;
  const StepTerm* t = step_time_term(key);
  if (!t || !t->planned) throw std::logic_error("no predicted term '" + key + "'");
  return p.time.*t->planned;
}

CostFit fit_cost(const RunSpec& run, const std::map<std::string, double>& measured) {
  if (!run.cost) throw std::logic_error("fit_cost needs a run with its cost table");
  CostFit out;
  RunSpec r = run;
  out.before = *r.cost;
  if (measured.count("optimizer"))
    out.steps.push_back(fit_one(r, &CostTable::hbm_efficiency, "memory-bound kernels (the optimizer's update)",
                                {"optimizer"}, measured));
  if (measured.count("compute"))
    out.steps.push_back(fit_one(r, &CostTable::gemm_peak_efficiency,
                                "GEMMs (the compute term, its memory-bound kernels at the value above)", {"compute"},
                                measured));
  const Member intra = plan::link_efficiency_field(r.cluster.intra.kind);
  const Member inter = plan::link_efficiency_field(r.cluster.inter.kind);
  out.intra_field = field_of(intra).name, out.inter_field = field_of(inter).name;
  const std::string intra_what = "collectives and sends inside an emulated host (" + to_string(r.cluster.intra.kind) +
                                 " link of the bench file: shared memory)";
  const std::string inter_what = "collectives and sends between emulated hosts (" + to_string(r.cluster.inter.kind) +
                                 " link: the shaped veth pair)";
  const Latency intra_latency{"intra-latency-us", false}, inter_latency{"inter-latency-us", true};
  struct Link {
    Member share, other;
    std::string what;
    Latency latency;
  };
  std::vector<Link> links = {{intra, inter, intra_what, intra_latency}, {inter, intra, inter_what, inter_latency}};
  if (intra == inter) links = {{intra, intra, "collectives and sends on either link (one share for both kinds)", intra_latency}};
  for (const Link& link : links) {
    std::string left_out;
    const auto terms = link_terms(r, link.share, link.other, measured, left_out);
    if (terms.empty()) {
      out.kept.emplace_back(field_of(link.share).name, "no measured collective or send of this rehearsal depends on it alone" +
                                                           (left_out.empty() ? std::string() : ": " + left_out));
      continue;
    }
    if (latency_bound(r, link.share, link.latency, terms)) {
      out.steps.push_back(fit_latency(r, link.latency, "latency of the " + link.what, terms, measured));
      if (out.steps.back().fitted) out.cluster_after.emplace_back(link.latency.key, out.steps.back().after);
      out.kept.emplace_back(field_of(link.share).name, "its terms (" + [&] {
        std::string t;
        for (const auto& k : terms) t += (t.empty() ? "" : "+") + k;
        return t;
      }() + ") are latency-bound: under a fifth of their prediction scales with it, so the link's latency is fitted instead");
    } else {
      out.steps.push_back(fit_one(r, link.share, link.what, terms, measured));
    }
    if (!left_out.empty()) out.steps.back().note += (out.steps.back().note.empty() ? "" : "; ") + ("left out: " + left_out);
  }
  out.kept.emplace_back("gemm_half_dim", "one compute term per layout cannot tell the GEMM curve's bend from its peak "
                                         "share: kept");
  out.kept.emplace_back("kernel_launch_us", "nor the kernel call cost from the peak share (one equation, one unknown "
                                            "fitted): kept");
  out.after = *r.cost;
  out.after.source = "fitted to the rehearsal (" + out.before.source + " before)";
  return out;
}

}  // namespace trident::rehearse
