#include "plan/rationale.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/dimensions.h"
#include "core/step_terms.h"
#include "core/units.h"

namespace trident::plan {

namespace {

std::string gb(double bytes) { return fmt::format("{:.1f} GiB", gib(bytes)); }

}  // namespace

std::string short_layout(const Estimate& e) {
  const auto& r = e.run;
  return fmt::format("{} ({}, b {}, {}{}, ZeRO {}, recompute {}{})", layout_sizes_text(r.layout), r.layout.order,
                     r.exec.micro_batch_size, to_string(r.exec.schedule),
                     r.exec.schedule == ScheduleKind::Interleaved ? fmt::format(" v {}", r.exec.virtual_stages) : "",
                     r.exec.zero, to_string(r.exec.recompute), r.exec.sequence_parallel ? ", sp" : "");
}

namespace {

// Best layout with some dimensions fixed: from the winner's search when it covered them, else
// searched again.
std::optional<Estimate> best_with(const ModelSpec& m, const ClusterSpec& cl, int64_t B, SearchSpace space,
                                  std::optional<int64_t> tp, std::optional<int64_t> pp, double overhead,
                                  const CostConstants& c, const SearchResult* searched, bool pp_above_one = false) {
  space.size(Dim::TP) = tp;
  space.size(Dim::PP) = pp;
  if (!pp_above_one) {
    if (searched)
      if (auto known = best_within(*searched, space)) return *known;
    auto r = search(m, cl, B, space, 1, overhead, c);
    if (r.best.empty()) return std::nullopt;
    return r.best.front();
  }
  std::optional<Estimate> best;
  const int64_t world = cl.world_size();
  for (int64_t p = 2; p <= std::min<int64_t>(m.layers, world); ++p) {
    if (world % p != 0 || (tp && (world / p) % *tp != 0)) continue;
    auto r = best_with(m, cl, B, space, tp, p, overhead, c, searched);
    if (r && (!best || r->tokens_per_s > best->tokens_per_s)) best = r;
  }
  return best;
}

}  // namespace

// The time terms where a differs most from b, largest first: "bubble +1.20 s, compute -0.40 s".
std::string differences(const Estimate& a, const Estimate& b) {
  struct Term {
    const char* name;
    double delta;
  };
  // Every term of the step (core/step_terms), each with its own sign: a and b may list different ones.
  std::vector<Term> terms;
  for (const StepTerm& term : step_time_terms())
    if (term.planned && !term.part_of) terms.push_back({term.step_label, a.time.*term.planned - b.time.*term.planned});
  std::stable_sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) { return std::fabs(x.delta) > std::fabs(y.delta); });
  std::string s;
  for (size_t i = 0; i < 3 && i < terms.size(); ++i) {
    if (std::fabs(terms[i].delta) < 1e-4 * a.time.step) break;
    s += fmt::format("{}{} {:+.3f} s", s.empty() ? "" : ", ", terms[i].name, terms[i].delta);
  }
  return s.empty() ? "no term differs noticeably" : s;
}

namespace {

int64_t largest_tp_in_node(const ModelSpec& m, const ClusterSpec& cl) {
  int64_t best = 1;
  for (int64_t t = 1; t <= cl.gpus_per_nvlink_domain(); ++t)
    if (cl.gpus_per_nvlink_domain() % t == 0 && m.heads % t == 0 && m.ffn_hidden % t == 0 && cl.world_size() % t == 0) best = t;
  return best;
}

}  // namespace

std::string rule_of_thumb(const ModelSpec& m, const ClusterSpec& cl) {
  const double billions = double(count_parameters(m).total) / 1e9;
  if (billions > 30 || cl.gpu.memory_bytes < 40 * kGB) return "TP+PP+DP";
  if (billions >= 10) return "PP+DP";
  return "plain DP";
}

namespace {

// What every step of the decision flow reads: the question, the winner and the search.
struct Flow {
  const ModelSpec& m;
  const ClusterSpec& cl;
  int64_t B;                 // global batch
  const SearchSpace& given;  // what the user fixed
  SearchSpace space;         // the same, cp and ep 1 unless fixed (steps 1-4 are about DP, TP and PP)
  const Estimate& win;
  double overhead;
  const CostConstants& c;
  const SearchResult* searched;
  double psi;  // parameters
  StateBytes sb;
  double per_param;  // bytes of model states per parameter
  double cap;        // GPU memory
  int64_t world;
  // The best layout of this question's model, cluster and batch in `s` with tp and pp fixed.
  std::optional<Estimate> best(const SearchSpace& s, std::optional<int64_t> tp, std::optional<int64_t> pp,
                               bool pp_above_one = false) const {
    return best_with(m, cl, B, s, tp, pp, overhead, c, searched, pp_above_one);
  }
  // The steps, in the chapter's order (steps 1-4 on `space`; 5 and 6 on what was given).
  std::string step_plain_dp(const std::optional<Estimate>& dp_only) const;
  std::string step_tp_in_domain() const;
  std::string step_add_pp() const;
  std::string step_3d() const;
  std::string step_context_parallel() const;
  std::string step_expert_parallel() const;
  std::string rule_of_thumb_check(const std::optional<Estimate>& dp_only) const;  // the rule of thumb against the search
};

// 1. Fits with plain DP?
std::string Flow::step_plain_dp(const std::optional<Estimate>& dp_only) const {
  std::string step1 = fmt::format(
      "1. Fits with plain DP? Every GPU would hold all {:.2f} B parameters: {:g} B each ({:g} weights + {:g} gradients + "
      "{:g} optimizer) = {} of model states against {} per GPU",
      psi / 1e9, per_param, sb.weights, sb.gradients, sb.optimizer, gb(psi * per_param), gb(cap));
  if (dp_only)
    step1 += fmt::format(". Yes{}: best plain-DP layout {} uses {} and reaches {:.0f} tokens/s",
                         dp_only->run.exec.zero > 0
                             ? fmt::format(", once ZeRO-{} shards the states over the {} replicas", dp_only->run.exec.zero,
                                           dp_only->run.layout.dp)
                             : "",
                         short_layout(*dp_only), gb(dp_only->peak_memory().total_bytes()), dp_only->tokens_per_s);
  else if (B % world != 0)
    step1 += fmt::format("; and plain DP over all {} GPUs cannot even split the global batch of {}: no", world, B);
  else
    step1 += fmt::format("; even ZeRO-3 over all {} GPUs ({} of states) plus the activations of one sequence does not "
                         "fit: no",
                         world, gb(psi * per_param / double(world)));
  return step1;
}

// 2. TP inside the NVLink domain?
std::string Flow::step_tp_in_domain() const {
  const int64_t tmax = largest_tp_in_node(m, cl);
  const double cross_bw = cl.inter_bandwidth_per_gpu_Bps();
  std::string step2 = fmt::format(
      "2. TP inside the {} domain? A node has {} GPUs on {} at {:.3g} GB/s per GPU, against {:.3g} GB/s per GPU between "
      "nodes ({:.0f}x slower), so TP stops at {} (heads {} and ffn {} divide it)",
      to_string(cl.intra.kind), cl.gpus_per_node, to_string(cl.intra.kind), gbps(cl.intra.bandwidth_Bps),
      gbps(cross_bw), cl.intra.bandwidth_Bps / cross_bw, tmax, m.heads, m.ffn_hidden);
  auto tp_only = tmax > 1 ? best(space, tmax, 1) : std::nullopt;
  if (tp_only)
    step2 += fmt::format(". tp {} alone fits: {} per GPU, TP takes {:.1f}% of the step, {:.0f} tokens/s", tmax,
                         gb(tp_only->peak_memory().total_bytes()), 100 * tp_only->time.tp_comm / tp_only->time.step,
                         tp_only->tokens_per_s);
  else if (tmax > 1)
    step2 += fmt::format(". tp {} alone does not fit: model states are still {} per GPU", tmax,
                         gb(psi / double(tmax) * per_param));
  if (cl.intra.kind != LinkKind::NVLink) step2 += " (this cluster has no NVLink: TP runs on PCIe, be careful)";
  return step2;
}

// 3. Add PP?
std::string Flow::step_add_pp() const {
  const int64_t tp_for_pp = win.run.layout.tp;
  std::optional<Estimate> first_fit;  // fewest stages that fit at the winner's tp (pp 1 included)
  for (int64_t p = 1; p <= std::min<int64_t>(m.layers, world / tp_for_pp); ++p) {
    if ((world / tp_for_pp) % p != 0) continue;
    first_fit = best(space, tp_for_pp, p);
    if (first_fit) break;
  }
  if (win.run.layout.pp > 1) {
    std::string step3 = fmt::format("3. Add PP? Yes: with tp {}", tp_for_pp);
    if (first_fit && first_fit->run.layout.pp == 1)
      step3 += fmt::format(", pp 1 would fit ({}: {} per GPU, {:.0f} tokens/s), but PP is faster",
                           short_layout(*first_fit), gb(first_fit->peak_memory().total_bytes()), first_fit->tokens_per_s);
    else if (first_fit)
      step3 += fmt::format(", the fewest stages that fit are pp {} ({} per GPU, {:.3g} layers per stage)",
                           first_fit->run.layout.pp, gb(first_fit->peak_memory().total_bytes()),
                           double(m.layers) / first_fit->run.layout.pp);
    step3 += fmt::format(
        "; the winner uses pp {} ({:.3g} layers per stage, {} micro-batches of {} per pipeline, {} schedule): "
        "bubble {:.1f}% of the step, pipeline sends {:.1f}%, {} per GPU",
        win.run.layout.pp, double(m.layers) / win.run.layout.pp, win.micro_batches, win.run.exec.micro_batch_size,
        to_string(win.run.exec.schedule), 100 * win.time.bubble / win.time.step, 100 * win.time.pp_comm / win.time.step,
        gb(win.peak_memory().total_bytes()));
    if (first_fit && first_fit->run.layout.pp < win.run.layout.pp)
      step3 += fmt::format(". More stages than needed win because {} (winner vs pp {}; negative = winner faster)",
                           differences(win, *first_fit), first_fit->run.layout.pp);
    return step3;
  }
  return fmt::format("3. Add PP? No: pp 1 already fits at tp {} ({} per GPU) and avoids the bubble", tp_for_pp,
                     gb(win.peak_memory().total_bytes()));
}

// 4. 3D past 32 GPUs?
std::string Flow::step_3d() const {
  const Layout& wl = win.run.layout;
  const std::string data_name = wl.cp > 1 ? fmt::format("DP {} (x cp {} = {} ranks sharing the dense gradients)", wl.dp,
                                                        wl.cp, wl.dp * wl.cp)
                                          : fmt::format("DP {}", wl.dp);
  if (world > 32)
    return fmt::format(
        "4. 3D past 32 GPUs? {} GPUs: {} on top of tp {} x pp {}; gradient reduction of {} per GPU on {} {:.3g} GB/s{} "
        "costs {:.3f} s, {:.3f} s of it exposed ({:.1f}% of the step)",
        world, data_name, wl.tp, wl.pp, gb(win.dp.gradient_bytes), to_string(win.links.dcp.link.kind),
        gbps(win.links.dcp.link.bandwidth_Bps),
        win.expert_dp.total_s > 0 ? fmt::format(" and of {} of expert gradients over the {} GPUs holding the same "
                                                "experts on {}",
                                                gb(win.expert_dp.gradient_bytes), win.expert_dp.dp,
                                                to_string(win.links.edp.link.kind))
                                  : "",
        win.dp.total_s + win.expert_dp.total_s, win.time.dp_comm, 100 * win.time.dp_comm / win.time.step);
  return fmt::format("4. 3D past 32 GPUs? Only {} GPUs: {} is what remains after tp x pp", world, data_name);
}

// 5. Long sequences: add CP?
std::string Flow::step_context_parallel() const {
  const Layout& wl = win.run.layout;
  // 5. Context parallel: long sequences whose activations do not fit.
  {
    SearchSpace no_cp = given;
    no_cp.size(Dim::CP) = 1;
    auto without = given.size(Dim::CP) && *given.size(Dim::CP) > 1 ? std::nullopt : best(no_cp, given.size(Dim::TP), given.size(Dim::PP));
    const StageMemory& pm = win.peak_memory();
    std::string step5 = fmt::format("5. Long sequences: add CP? Sequences of {} tokens", m.seq_len);
    if (wl.cp > 1) {
      step5 += fmt::format(
          "; cp {} gives each rank {} of them ({:.1f} MiB of activations per layer and micro-batch on the most loaded "
          "stage)",
          wl.cp, m.seq_len / wl.cp, pm.per_layer_activation_bytes / kMiB);
      if (without)
        step5 += fmt::format(". Without cp the best layout is {} ({} per GPU, {:.0f} tokens/s): cp wins because {} "
                             "(winner vs it; negative = winner faster)",
                             short_layout(*without), gb(without->peak_memory().total_bytes()), without->tokens_per_s,
                             differences(win, *without));
      else if (!given.size(Dim::CP))
        step5 += ". Without cp no layout fits: one sequence's activations are too big for a GPU at any tp x pp";
      else
        step5 += fmt::format(" (cp {} as given)", *given.size(Dim::CP));
      step5 += fmt::format(
          ". The ring passes {} KV blocks of {:.2f} MiB per layer on {}: {:.3f} s per step, {:.3f} s of it hidden "
          "behind attention, {:.3f} s exposed ({:.1f}% of the step)",
          win.cp_ring.steps, win.cp_ring.block_bytes / kMiB, to_string(win.links.cp.link.kind),
          win.time.cp_comm + win.time.cp_hidden, win.time.cp_hidden, win.time.cp_comm,
          100 * win.time.cp_comm / win.time.step);
    } else {
      step5 += fmt::format(
          ": no, the activations fit with cp 1 ({:.1f} MiB per layer and micro-batch, {} on the most loaded stage)",
          pm.per_layer_activation_bytes / kMiB, gb(pm.activations_bytes));
      if (!given.size(Dim::CP) && m.seq_len < 2 * space.min_tokens_per_cp_rank)
        step5 += fmt::format("; cp is searched only while each rank keeps {}+ tokens", space.min_tokens_per_cp_rank);
    }
    return step5;
  }
}

// 6. Mixture of experts: add EP?
std::string Flow::step_expert_parallel() const {
  const Layout& wl = win.run.layout;
  // 6. Expert parallel: the routed experts' weights of a mixture-of-experts model.
  {
    const ParamCount pcount = count_parameters(m);
    const double routed = double(pcount.routed_experts_per_layer) * double(m.moe_layers());
    // The winner's layout with every expert on every GPU of a stage (ep 1): the expert states then.
    const auto ep1 = stage_memory(m, win.run.exec, {wl.tp, wl.pp, wl.dp, overhead, wl.cp, 1});
    double ep1_experts = 0, ep1_total = 0;
    for (const auto& st : ep1) {
      ep1_experts = std::max(ep1_experts, st.expert_state_bytes);
      ep1_total = std::max(ep1_total, st.total_bytes());
    }
    const StageMemory& pm = win.peak_memory();
    std::string step6 = fmt::format(
        "6. Mixture of experts: add EP? {} experts (top-{}) hold {:.2f} B of the {:.2f} B parameters; at tp {} x pp {} "
        "with ep 1 every GPU keeps all {} experts of its layers ({}): {} of expert states, {} per GPU in all{}",
        m.experts, m.experts_per_token, routed / 1e9, double(pcount.total) / 1e9, wl.tp, wl.pp, m.experts,
        wl.etp > 1 ? fmt::format("each split over etp {}", wl.etp) : std::string("whole: etp 1"),
        gb(ep1_experts), gb(ep1_total), ep1_total > cap ? " (does not fit)" : "");
    if (wl.ep > 1)
      step6 += fmt::format(
          ". Yes: ep {} leaves {} experts per GPU ({} of expert states, {} in all); dispatch and combine all-to-alls "
          "on {} cost {:.3f} s ({:.1f}% of the step), and the expert gradients are reduced over "
          "the {} GPUs holding the same experts",
          wl.ep, m.experts / wl.ep, gb(pm.expert_state_bytes), gb(pm.total_bytes()), to_string(win.links.ep.link.kind),
          win.time.ep_comm, 100 * win.time.ep_comm / win.time.step, wl.size(Dim::EDP));
    else
      step6 += ". No: that fits, and ep 1 needs no all-to-all";
    return step6;
  }
}

// The rule of thumb against the search.
std::string Flow::rule_of_thumb_check(const std::optional<Estimate>& dp_only) const {
  const std::string rule = rule_of_thumb(m, cl);
  const double billions = psi / 1e9;
  std::string why = fmt::format("{:.1f} B params{}", billions,
                                cl.gpu.memory_bytes < 40 * kGB ? fmt::format(", {} GPUs", gb(cl.gpu.memory_bytes)) : "");
  std::optional<Estimate> rule_best;
  bool agrees = false;
  if (rule == "plain DP") {
    rule_best = dp_only;
    agrees = win.run.layout.tp == 1 && win.run.layout.pp == 1;
  } else if (rule == "PP+DP") {
    rule_best = best(space, 1, std::nullopt, /*pp_above_one=*/true);
    agrees = win.run.layout.tp == 1 && win.run.layout.pp > 1;
  } else {
    agrees = win.run.layout.tp > 1;
    rule_best = win;
  }
  if (agrees) return fmt::format("Rule of thumb ({} -> {}) agrees with the search", why, rule);
  if (!rule_best)
    return fmt::format("Rule of thumb ({} -> {}) would choose a layout that does not fit here: {}", why, rule,
                       rule == "plain DP" ? fmt::format("plain DP needs {} of model states per GPU", gb(psi * per_param))
                                          : "no PP+DP layout without TP fits in memory");
  return fmt::format(
      "Rule of thumb ({} -> {}) would choose differently: its best layout {} reaches {:.0f} tokens/s, {:.1f}% of the "
      "winner; it differs by {}",
      why, rule, short_layout(*rule_best), rule_best->tokens_per_s, 100 * rule_best->tokens_per_s / win.tokens_per_s,
      differences(*rule_best, win));
}

std::vector<std::string> explain(const ModelSpec& m, const ClusterSpec& cl, int64_t B, const SearchSpace& given,
                                 const Estimate& win, double overhead, const CostConstants& c,
                                 const SearchResult* searched) {
  // The chapter's steps 1-4 are about DP, TP and PP: they are asked without cp and ep (unless the
  // user fixed them); steps 5 and 6 say where cp and ep enter.
  SearchSpace space = given;
  for (Dim d : {Dim::CP, Dim::EP})
    if (!space.size(d)) space.size(d) = 1;
  const StateBytes sb = state_bytes(space.settings);
  const Flow k{m, cl, B, given, space, win, overhead, c, searched, double(count_parameters(m).total), sb,
               sb.weights + sb.gradients + sb.optimizer, cl.gpu.memory_bytes, cl.world_size()};
  const auto dp_only = best_with(m, cl, B, space, 1, 1, overhead, c, searched);
  std::vector<std::string> out = {k.step_plain_dp(dp_only), k.step_tp_in_domain(), k.step_add_pp(), k.step_3d(),
                                  k.step_context_parallel()};
  if (m.is_moe()) out.push_back(k.step_expert_parallel());
  out.push_back(fmt::format("Winner: {}: {:.0f} tokens/s, step {:.3f} s, {} per GPU, MFU {:.1f}%", short_layout(win),
                            win.tokens_per_s, win.time.step, gb(win.peak_memory().total_bytes()), 100 * win.mfu));

  out.push_back(k.rule_of_thumb_check(dp_only));
  return out;
}

}  // namespace

std::vector<std::string> rationale(const ModelSpec& m, const ClusterSpec& cl, int64_t B, const SearchSpace& given,
                                   const Estimate& win, double overhead, const CostConstants& c) {
  return explain(m, cl, B, given, win, overhead, c, nullptr);
}

std::vector<std::string> rationale(const ModelSpec& m, const ClusterSpec& cl, int64_t B, const SearchSpace& space,
                                   const Estimate& win, double overhead) {
  return rationale(m, cl, B, space, win, overhead, win.cost);
}

std::vector<std::string> rationale(const ModelSpec& m, const ClusterSpec& cl, int64_t B, const SearchResult& searched,
                                   double overhead) {
  const Estimate& win = searched.best.front();
  return explain(m, cl, B, searched.space, win, overhead, win.cost, &searched);
}

}  // namespace trident::plan
