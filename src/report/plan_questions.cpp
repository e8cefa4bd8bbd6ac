#include "report/plan_questions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/dimensions.h"
#include "core/step_terms.h"
#include "core/units.h"
#include "plan/rationale.h"

namespace trident {

std::optional<plan::SearchSpace> parse_compared_layout(const std::string& text, const plan::SearchSpace& base,
                                                       Problems& p) {
  plan::SearchSpace s = base;
  std::string t = text;
  std::replace(t.begin(), t.end(), 'x', '-');
  size_t at = 0;
  std::vector<Dim> named;
  while (at <= t.size()) {
    const size_t end = std::min(t.find('-', at), t.size());
    const std::string part = t.substr(at, end - at);
    size_t digits = part.find_first_of("0123456789");
    const std::string name = part.substr(0, digits);
    const Dimension* dim = nullptr;
    for (const Dimension& d : dimensions())
      if (name == d.name) dim = &d;
    const std::string number = digits == std::string::npos ? "" : part.substr(digits);
    const bool whole = !number.empty() && number.size() <= 6 &&
                       std::all_of(number.begin(), number.end(), [](char c) { return std::isdigit(c); });
    if (!dim || !whole || std::stoll(number) <= 0) {
      p.add(fmt::format("--compare '{}': '{}' is not a dimension and its size", text, part),
            "write each layout as sizes joined by '-', e.g. --compare tp8-pp4,tp4-pp8-dp16 (tp, pp, dp, cp, ep)",
            "compare-layout");
      return std::nullopt;
    }
    if (std::find(named.begin(), named.end(), dim->dim) != named.end()) {
      p.add(fmt::format("--compare '{}' gives {} twice", text, dim->name), "give each dimension once", "compare-layout");
      return std::nullopt;
    }
    s.size(dim->dim) = std::stoll(number);
    named.push_back(dim->dim);
    at = end + 1;
  }
  return s;
}

std::vector<Compared> compare_layouts(const std::vector<std::string>& layouts, const ModelSpec& model,
                                      const ClusterSpec& cluster, int64_t global_batch, const plan::SearchSpace& base,
                                      double overhead, const plan::CostConstants& cost, Problems& p) {
  std::vector<plan::SearchSpace> spaces;
  for (const auto& l : layouts)
    if (auto s = parse_compared_layout(l, base, p)) spaces.push_back(*s);
  if (layouts.size() < 2)
    p.add(fmt::format("--compare has {} layout: it compares two or more", layouts.size()),
          "give e.g. --compare tp8-pp4,tp4-pp8", "compare-layout");
  p.throw_if_any();
  std::vector<Compared> out;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const plan::SearchResult r = plan::search(model, cluster, global_batch, spaces[i], 1, overhead, cost);
    Compared c{layouts[i], std::nullopt, ""};
    if (!r.best.empty()) c.best = r.best.front();
    int64_t most = 0;
    for (const auto& [reason, n] : r.rejected)
      if (reason.rfind("pruned:", 0) != 0 && reason.rfind("dominated:", 0) != 0 && n > most) most = n, c.why_not = reason;
    out.push_back(std::move(c));
  }
  return out;
}

std::string compare_text(const std::vector<Compared>& cs) {
  // One column per layout, one row per figure: the step's terms (core/step_terms, each one any
  // layout has) add up to its step time.
  std::vector<const StepTerm*> terms;
  for (const StepTerm& term : step_time_terms())
    for (const Compared& c : cs) {
      if (!c.best) continue;
      const std::vector<PlannedTerm> has = planned_step_terms(c.best->run, c.best->time);
      if (std::any_of(has.begin(), has.end(), [&](const PlannedTerm& p) { return p.term == &term; })) {
        terms.push_back(&term);
        break;
      }
    }
  std::vector<std::pair<std::string, std::vector<std::string>>> rows = {{"layout", {}}, {"recipe", {}}, {"step s", {}}};
  for (size_t k = 0; k < terms.size(); ++k) rows.push_back({(k ? "+ " : "= ") + std::string(terms[k]->step_label), {}});
  const size_t after_terms = rows.size();
  for (const char* name : {"tokens/s", "MFU", "memory GiB", "vs first"}) rows.push_back({name, {}});
  const double first = cs.front().best ? cs.front().best->tokens_per_s : 0;
  for (const Compared& c : cs) {
    std::vector<std::string> v(rows.size(), "-");
    v[0] = c.asked;
    if (!c.best) {
      v[1] = "no layout fits: " + c.why_not;
    } else {
      const plan::Estimate& e = *c.best;
      const plan::TimeBreakdown& t = e.time;
      v[0] = layout_sizes_text(e.run.layout);
      v[1] = plan::short_layout(e);
      v[2] = fmt::format("{:.3f}", t.step);
      for (size_t k = 0; k < terms.size(); ++k) v[3 + k] = fmt::format("{:.3f}", t.*terms[k]->planned);
      v[after_terms] = fmt::format("{:.0f}", e.tokens_per_s);
      v[after_terms + 1] = fmt::format("{:.1f}%", 100 * e.mfu);
      v[after_terms + 2] = fmt::format("{:.1f} of {:.1f}", gib(e.peak_memory().total_bytes()), gib(e.capacity_bytes));
      v[after_terms + 3] = first > 0 ? fmt::format("{:.2f}x", e.tokens_per_s / first) : "-";
    }
    for (size_t i = 0; i < rows.size(); ++i) rows[i].second.push_back(v[i]);
  }
  std::string s = fmt::format("Compared layouts ({}), each with the best recipe the search finds for it "
                              "(the sizes given fixed, the rest searched):\n",
                              cs.size());
  // Each layout as a block: long recipe texts do not fit side by side in a terminal.
  size_t label = 0;
  for (const auto& [name, v] : rows) label = std::max(label, name.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 1) continue;  // the recipe goes under the table
    s += fmt::format("  {:<{}}", rows[i].first, label);
    for (const auto& x : rows[i].second) s += fmt::format("  {:>22}", x.size() > 22 ? x.substr(0, 22) : x);
    s += "\n";
  }
  for (size_t k = 0; k < cs.size(); ++k) s += fmt::format("  #{} {}: {}\n", k + 1, rows[0].second[k], rows[1].second[k]);
  return s;
}

nlohmann::json compare_json(const std::vector<Compared>& cs) {
  nlohmann::json out = nlohmann::json::array();
  for (const Compared& c : cs) {
    nlohmann::json j = {{"asked", c.asked}, {"fits", c.best.has_value()}};
    if (!c.best) {
      j["rejected_most_by"] = c.why_not;
    } else {
      const plan::Estimate& e = *c.best;
      j["layout"] = e.run.layout.describe();
      j["recipe"] = plan::short_layout(e);
      j["step_s"] = e.time.step;
      j["time_s"] = nlohmann::json::object();  // plan --json's keys (core/step_terms)
      for (const StepTerm& term : step_time_terms())
        if (term.plan_key) j["time_s"][term.plan_key] = e.time.*term.planned;
      j["tokens_per_s"] = e.tokens_per_s;
      j["mfu"] = e.mfu;
      j["memory_gib"] = gib(e.peak_memory().total_bytes());
    }
    out.push_back(j);
  }
  return out;
}

std::vector<PublishedPlanned> plan_published_layouts(const ModelSpec& model, const ClusterSpec& cluster,
                                                     int64_t global_batch, const plan::SearchSpace& base,
                                                     double overhead, const plan::CostConstants& cost) {
  std::vector<PublishedPlanned> out;
  for (const plan::PublishedLayout& pub : plan::published_layouts_for(model, cluster)) {
    plan::SearchSpace s = base;
    const int64_t model_ranks = pub.tp * pub.pp * pub.cp;
    s.size(Dim::TP) = pub.tp, s.size(Dim::PP) = pub.pp, s.size(Dim::CP) = pub.cp, s.size(Dim::EP) = pub.ep;
    s.size(Dim::ETP) = 1;  // Megatron's default: experts whole, folded over tp x cp x dp
    s.size(Dim::DP) = cluster.world_size() / model_ranks;
    s.virtual_stages = pub.vp;
    if (pub.vp > 1) s.schedule = ScheduleKind::Interleaved;
    if (pub.micro_batch > 0) s.micro_batch = pub.micro_batch;
    s.zero = pub.zero;
    // Megatron-Bridge's recipes count the embedding and the loss as pipeline units where the
    // layers alone do not divide over the chunks (Llama 3.1 405B: 126 + 2 over pp 16 x v 8).
    const int64_t chunks = pub.pp * pub.vp;
    if (chunks > 1 && model.layers % chunks != 0 && (model.layers + 2) % chunks == 0)
      s.settings.embedding_in_pipeline_split = s.settings.loss_in_pipeline_split = true;
    std::string asked = fmt::format("tp{}-pp{}-cp{}-ep{}", pub.tp, pub.pp, pub.cp, pub.ep);
    Compared c{asked, std::nullopt, ""};
    const plan::SearchResult r = plan::search(model, cluster, global_batch, s, 1, overhead, cost);
    if (!r.best.empty()) c.best = r.best.front();
    int64_t most = 0;
    for (const auto& [reason, n] : r.rejected)
      if (reason.rfind("pruned:", 0) != 0 && reason.rfind("dominated:", 0) != 0 && n > most) most = n, c.why_not = reason;
    out.push_back({pub, std::move(c)});
  }
  return out;
}

namespace {

std::string published_name(const plan::PublishedLayout& p) {
  return fmt::format("{} on {} {}: tp {} pp {} (virtual {}) cp {} ep {}, {}, micro-batch {}, global batch {}, {} ({})",
                     p.model, p.gpus, p.gpu, p.tp, p.pp, p.vp, p.cp, p.ep, p.zero == 3 ? "FSDP" : "distributed optimizer",
                     p.micro_batch > 0 ? std::to_string(p.micro_batch) : "not stated",
                     p.global_batch > 0 ? std::to_string(p.global_batch) : "not stated",
                     p.precision.empty() ? "precision not stated" : p.precision, p.source);
}

// The step's terms where the best and the published layout differ most, larger first.
std::string term_differences(const nlohmann::json& best, const nlohmann::json& pub) {
  std::vector<std::pair<double, std::string>> d;
  for (const auto& [term, value] : best["time_s"].items()) {
    const double b = value.get<double>(), q = pub["time_s"][term].get<double>();
    if (std::abs(b - q) >= 0.0005)
      d.push_back({b - q, fmt::format("{} {:.3f} -> {:.3f} s ({:+.3f})", term, q, b, b - q)});
  }
  std::sort(d.begin(), d.end(), [](const auto& x, const auto& y) { return std::abs(x.first) > std::abs(y.first); });
  std::string s;
  for (const auto& [delta, text] : d) s += (s.empty() ? "" : "; ") + text;
  return s.empty() ? "no term differs" : s;
}

// Why the search's own space leaves a published layout out, where it can tell.
std::string unreached_because(const plan::PublishedLayout& p, int64_t layers) {
  const int64_t chunks = p.pp * p.vp;
  if (p.vp <= 1 || layers % chunks == 0) return "";
  if ((layers + 2) % chunks == 0)
    return fmt::format(" ({} layers divide over pp {} x v {} only with the embedding and the loss as pipeline units, "
                       "which the search counts only when asked: --account-for-embedding-in-pipeline-split "
                       "--account-for-loss-in-pipeline-split)", layers, p.pp, p.vp);
  return fmt::format(" ({} layers over pp {} x v {} are uneven chunks, which the search interleaves only when asked: "
                     "--virtual-stages {})", layers, p.pp, p.vp, p.vp);
}

}  // namespace

std::string published_text(const std::vector<PublishedPlanned>& ps, const plan::Estimate& best) {
  std::string s;
  const int64_t model_layers = best.run.model.layers;
  for (const PublishedPlanned& p : ps) {
    s += "\nPublished layout: " + published_name(p.published) + "\n";
    if (p.published.global_batch > 0 && p.published.global_batch != best.run.exec.global_batch_size)
      s += fmt::format("  (published at global batch {}; planned here at yours, {})\n", p.published.global_batch,
                       best.run.exec.global_batch_size);
    const std::vector<Compared> side = {{"search's #1", best, ""}, p.planned};
    s += compare_text(side);
    if (!p.planned.best) continue;
    const nlohmann::json j = compare_json(side);
    const double ratio = best.tokens_per_s / p.planned.best->tokens_per_s;
    if (ratio > 1.0005)
      s += fmt::format("  The search's #1 is {:.2f}x the published layout's predicted throughput; by term (published -> "
                       "#1): {}\n", ratio, term_differences(j[0], j[1]));
    else if (ratio > 0.9995)
      s += "  The published layout is as fast as the search's #1 here (it is, or ties with, the best).\n";
    else
      s += fmt::format("  The published layout is predicted {:.2f}x faster than the search's #1: the search did not "
                       "reach it{}; by term (#1 -> published): {}\n",
                       1 / ratio,
                       unreached_because(p.published, model_layers),
                       term_differences(j[1], j[0]));
  }
  return s;
}

nlohmann::json published_json(const std::vector<PublishedPlanned>& ps, const plan::Estimate& best) {
  nlohmann::json out = nlohmann::json::array();
  for (const PublishedPlanned& p : ps) {
    const plan::PublishedLayout& q = p.published;
    nlohmann::json j = {{"model", q.model}, {"gpu", q.gpu}, {"gpus", q.gpus}, {"tp", q.tp}, {"pp", q.pp},
                        {"vp", q.vp},       {"cp", q.cp},   {"ep", q.ep},     {"zero", q.zero},
                        {"micro_batch", q.micro_batch},     {"global_batch", q.global_batch},
                        {"precision", q.precision},         {"source", q.source}};
    const nlohmann::json side = compare_json({{"search's #1", best, ""}, p.planned});
    j["planned"] = side[1];
    if (p.planned.best) j["best_over_published"] = best.tokens_per_s / p.planned.best->tokens_per_s;
    out.push_back(j);
  }
  return out;
}

namespace {
constexpr int64_t kMostNodes = 1 << 16;
}

FewestGpus fewest_gpus(double days, const TrainBudget& budget, const ModelSpec& model, const ClusterSpec& cluster,
                       int64_t global_batch, const plan::SearchSpace& space, double overhead, const plan::CostConstants& cost) {
  FewestGpus f;
  f.days = days;
  // Days at a node count (empty: no layout fits), with its best and time kept for the answer.
  auto at = [&](int64_t nodes) -> std::optional<double> {
    ClusterSpec c = cluster;
    c.nodes = nodes;
    const plan::SearchResult r = plan::search(model, c, global_batch, space, 1, overhead, cost);
    std::optional<double> d;
    if (!r.best.empty()) {
      const TimeToTrain t = time_to_train(budget, global_batch, model.seq_len, r.best.front().time.step,
                                          c.world_size(), "planner, best layout at " + std::to_string(nodes) + " nodes");
      d = t.days;
      if (t.days <= days && (!f.nodes || nodes < *f.nodes)) f.nodes = nodes, f.best = r.best.front(), f.time = t;
    }
    f.tried.emplace_back(nodes, d);
    return d;
  };
  auto meets = [&](int64_t n) {
    const auto d = at(n);
    return d && *d <= days;
  };
  int64_t hi = 1;
  while (hi <= kMostNodes && !meets(hi)) hi *= 2;
  if (hi > kMostNodes) return f;
  // Bisect (hi / 2, hi]: the fewest nodes that meet the deadline, where more nodes never slow
  // the best layout down by more than the divisibility of the batch allows.
  int64_t lo = hi / 2;  // does not meet it (or 0)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (meets(mid)) hi = mid;
    else lo = mid;
  }
  return f;
}

std::string fewest_gpus_text(const FewestGpus& f, const ClusterSpec& cluster) {
  std::string tried;
  for (const auto& [n, d] : f.tried)
    tried += fmt::format("{}{} -> {}", tried.empty() ? "" : ", ", n, d ? fmt::format("{:.1f} d", *d) : "no fit");
  if (!f.nodes)
    return fmt::format("--days {:g}: no node count up to {} trains it in time (nodes tried -> days: {})\n", f.days,
                       kMostNodes, tried);
  return fmt::format("--days {:g}: the fewest GPUs found: {} nodes x {} = {} GPUs, {:.1f} days with {}\n"
                     "  (node counts doubled from 1, then bisected; nodes tried -> days of the best layout: {})\n{}",
                     f.days, *f.nodes, cluster.gpus_per_node, *f.nodes * cluster.gpus_per_node, f.time->days,
                     plan::short_layout(*f.best), tried, time_to_train_text(*f.time));
}

nlohmann::json fewest_gpus_json(const FewestGpus& f, const ClusterSpec& cluster) {
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& [n, d] : f.tried) tried.push_back({{"nodes", n}, {"days", d ? nlohmann::json(*d) : nlohmann::json(nullptr)}});
  nlohmann::json j = {{"days", f.days}, {"tried", tried}};
  j["nodes"] = f.nodes ? nlohmann::json(*f.nodes) : nlohmann::json(nullptr);
  j["gpus"] = f.nodes ? nlohmann::json(*f.nodes * cluster.gpus_per_node) : nlohmann::json(nullptr);
  if (f.best) j["layout"] = plan::short_layout(*f.best);
  if (f.time) j["time_to_train"] = time_to_train_json(*f.time);
  return j;
}

}  // namespace trident
