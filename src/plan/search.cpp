#include "plan/search.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "core/dimensions.h"
#include "core/layout_rules.h"
#include "core/pipeline_units.h"
#include "core/run_spec.h"

namespace trident::plan {

namespace {

std::vector<int64_t> all_divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      small.push_back(i);
      if (i != n / i) large.push_back(n / i);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// Two orders are the same candidate when every group lands on the same links.
auto signature(const Links& l) {
  auto one = [](const DimLink& d) {
    return std::make_tuple(int(d.link.kind), d.link.bandwidth_Bps, d.link.nodes, d.members_per_node);
  };
  return std::make_tuple(one(l.tp), one(l.pp), one(l.dp), int(l.embedding.kind), one(l.cp), one(l.ep), one(l.dcp),
                         one(l.edp), one(l.etp));
}

// The same candidate but for the rank order.
bool same_but_order(const RunSpec& a, const RunSpec& b) {
  const Layout &x = a.layout, &y = b.layout;
  const ExecutionSpec &p = a.exec, &q = b.exec;
  return x.tp == y.tp && x.pp == y.pp && x.dp == y.dp && x.cp == y.cp && x.ep == y.ep && x.etp == y.etp &&
         p.micro_batch_size == q.micro_batch_size && p.schedule == q.schedule && p.virtual_stages == q.virtual_stages &&
         p.zero == q.zero && p.recompute == q.recompute && p.sequence_parallel == q.sequence_parallel;
}

// A kept candidate that differs from `e` only in rank order takes the better of the two, and the
// other's order joins its other_orders: the best-N list holds N distinct layouts. True if merged.
template <class Better>
bool merge_order(std::vector<Estimate>& best, Estimate& e, Better better) {
  auto it = std::find_if(best.begin(), best.end(), [&](const Estimate& k) { return same_but_order(k.run, e.run); });
  if (it == best.end()) return false;
  if (!better(e, *it)) {
    it->other_orders.emplace_back(e.run.layout.order, e.tokens_per_s);
    return true;
  }
  e.other_orders = std::move(it->other_orders);
  e.other_orders.emplace_back(it->run.layout.order, it->tokens_per_s);
  best.erase(it);
  best.insert(std::upper_bound(best.begin(), best.end(), e, better), std::move(e));
  return true;
}

struct Schedule {
  ScheduleKind kind;
  int64_t v;
};

// The dimensions a shape (best_per_shape's key) gives, in the key's order; dp follows from them.
constexpr std::array<Dim, 4> kShapeDims = {Dim::TP, Dim::PP, Dim::CP, Dim::EP};

}  // namespace

void SearchSpace::use_stack(const ExecutionSpec& exec) {
  settings = exec;
  const StackPreset* preset = find_stack(exec.stack);
  if (preset && preset->zero_fixed) zero = exec.zero;
  if (preset) stack_schedules = preset->schedules;  // the framework has no other
}

void SearchSpace::fix_layout(const Layout& l) {
  for (const Dimension& d : dimensions()) size(d.dim) = l.*d.size;
  order = l.order;
}

bool better_estimate(const Estimate& a, const Estimate& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  return a.peak_memory().total_bytes() < b.peak_memory().total_bytes();
}

std::optional<std::optional<Estimate>> best_within(const SearchResult& searched, const SearchSpace& narrower) {
  const SearchSpace& wide = searched.space;
  // Each shape dimension: searched over all values, or fixed to the same one. A cp above 1 the
  // wide search did not fix may have been pruned there (min tokens per cp rank).
  for (Dim d : kShapeDims)
    if (wide.size(d) && wide.size(d) != narrower.size(d)) return std::nullopt;
  if (!wide.size(Dim::CP) && narrower.size(Dim::CP) && *narrower.size(Dim::CP) > 1) return std::nullopt;
  // Pruned by the bound, the bests are exact at each tp and pp with cp (and ep) 1 or above 1 in
  // all, not for one cp or ep above 1.
  if (wide.prune_by_bound)
    for (Dim d : {Dim::CP, Dim::EP})
      if (!wide.size(d) && narrower.size(d) && *narrower.size(d) != 1) return std::nullopt;
  std::optional<Estimate> best;
  // Shapes in search order (tp, pp, cp, ep ascending): the first of equals wins, as in a search.
  for (const auto& [shape, e] : searched.best_per_shape) {
    bool inside = true;
    for (size_t k = 0; k < kShapeDims.size(); ++k)
      if (const auto& fixed = narrower.size(kShapeDims[k]); fixed && shape[k] != *fixed) inside = false;
    if (inside && (!best || better_estimate(e, *best))) best = e;
  }
  return best;
}

// The rule table's tp rules (tp-divides-heads, -kv-heads, -ffn, -expert-ffn), as check_run says them.
bool tp_divides_model(const ModelSpec& model, int64_t tp) {
  if (tp <= 0) return false;
  RunSpec r;
  r.model = model;
  r.layout.tp = tp;
  Problems p;
  check_dimension_rules({"tp"}, r, p);
  return p.empty();
}

SearchResult search(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                    const SearchSpace& space, int top, double overhead) {
  return search(model, cluster, global_batch, space, top, overhead, builtin_cost(cluster.gpu));
}

namespace {

// One search: the question, what it keeps, and the steps of the enumeration (a shape's distinct
// rank orders, its pipeline schedules, the recipes of each), so that each loop stays short.
struct Searcher {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  int64_t global_batch;
  const SearchSpace& space;
  int top;
  double overhead;
  const CostConstants& c;
  SearchResult& res;
  RunSpec run;  // the candidate being built

  void reject(const std::string& reason, int64_t n = 1) {
    if (n > 0) res.rejected[reason] += n;
  }
  // Whether the rule table's rule `code` holds for the candidate as set in `run`: the search
  // prunes by the rules check_run says, not by predicates of its own.
  bool holds(const char* code) const {
    Problems p;
    find_layout_rule(code)->check(run, p);
    return p.empty();
  }
  int64_t etp() const { return space.size(Dim::ETP).value_or(1); }

  // The rank orders of a shape whose groups land on distinct links, each with its links.
  std::vector<std::pair<std::string, Links>> distinct_orders(int64_t tp, int64_t cp, int64_t dp, int64_t pp,
                                                             int64_t ep) {
    static const std::vector<std::string> all_orders = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp",
                                                        "pp-tp-dp", "dp-pp-tp", "pp-dp-tp"};
    // With cp or ep: Megatron-Core's default and the variants that move cp or pp; ep stays next to dp.
    static const std::vector<std::string> cp_ep_orders = {"tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp", "tp-pp-cp-ep-dp",
                                                          "tp-ep-dp-cp-pp"};
    std::vector<std::pair<std::string, Links>> layouts;
    const std::vector<std::string>& orders =
        space.order ? std::vector<std::string>{*space.order} : (cp > 1 || ep > 1 ? cp_ep_orders : all_orders);
    for (const auto& order : orders) {
      Layout l{tp, cp, dp, pp, order, ep, etp()};
      Problems invalid;
      validate_layout(l, invalid);
      if (!invalid.empty()) {
        reject("order does not fit the layout (" + order + ")");
        continue;
      }
      Mesh mesh(l, cluster.gpus_per_node);
      Links links = mesh_links(mesh, cluster);
      if (tp_crosses_domains(tp, links.tp.link)) {
        reject("TP groups leave their node (lint's error tp-crosses-nodes)");
        continue;
      }
      bool dup = false;
      for (const auto& [o, other] : layouts) dup = dup || signature(other) == signature(links);
      if (dup && space.dedupe_orders) {
        ++res.duplicate_orders;
        continue;
      }
      layouts.emplace_back(order, std::move(links));
    }
    return layouts;
  }

  // The pipeline schedules to try at pp stages and m micro-batches per pipeline.
  std::vector<Schedule> schedules(int64_t pp, int64_t m, int64_t n_orders) {
    std::vector<Schedule> out;
    auto want = [&](ScheduleKind k) {
      return (!space.schedule || *space.schedule == k) &&
             (space.stack_schedules.empty() ||
              std::find(space.stack_schedules.begin(), space.stack_schedules.end(), k) != space.stack_schedules.end());
    };
    // With the embedding and/or the loss counted as pipeline units (Megatron's
    // --account-for-*-in-pipeline-split), the layers + units divide over the chunks, as Megatron
    // requires (lint's pp-exceeds-layers); without them the chunks are at most the layers.
    const int64_t extra = pipeline_split_extra_units(space.settings), units = model.layers + extra;
    // A --pipeline-layout fixes the chunks: pp of them (one per stage), or pp x v interleaved.
    const PipelineLayout& given = space.settings.pipeline_layout;
    if (!given.empty() && given.chunks() != pp) {
      const int64_t v = given.chunks() / pp;
      if (given.chunks() % pp == 0 && v >= 2 && want(ScheduleKind::Interleaved) &&
          (!space.virtual_stages || *space.virtual_stages == v) && m % pp == 0)
        out.push_back({ScheduleKind::Interleaved, v});
      else
        reject("the --pipeline-layout's chunks are not this pp's stages (x virtual stages)", n_orders);
      return out;
    }
    auto splits = [&](int64_t v) { return extra == 0 ? pp * v <= units : units % (pp * v) == 0; };
    if (!splits(1)) {
      reject("layers + embedding / loss units do not divide over pp", n_orders);
      return out;
    }
    if (want(ScheduleKind::OneFOneB)) out.push_back({ScheduleKind::OneFOneB, 1});
    if (pp == 1) return out;
    if (want(ScheduleKind::GPipe)) {
      if (space.schedule || !space.prune_dominated) out.push_back({ScheduleKind::GPipe, 1});
      else reject("dominated: gpipe (1f1b's time with more activation memory)", n_orders);
    }
    if (want(ScheduleKind::ZeroBubbleH1)) out.push_back({ScheduleKind::ZeroBubbleH1, 1});
    if (!want(ScheduleKind::Interleaved) || !given.empty()) return out;
    for (int64_t v = 2; pp * v <= units && v <= 16; ++v) {
      if (space.virtual_stages && v != *space.virtual_stages) continue;
      if (!splits(v)) continue;
      // Unasked, the search interleaves equal chunks only (uneven ones are a deliberate choice,
      // as Megatron's first/last-stage layer counts are); asked for by --schedule interleaved or
      // --virtual-stages, uneven chunks are estimated as lint does (the slowest chunk paces).
      const bool asked = space.virtual_stages || space.schedule == ScheduleKind::Interleaved;
      if (extra == 0 && model.layers % (pp * v) != 0 && !asked) continue;
      if (m % pp != 0) {
        reject("interleaved needs micro-batches divisible by pp", n_orders);
        continue;
      }
      out.push_back({ScheduleKind::Interleaved, v});
    }
    return out;
  }

  // One recipe of a shape waiting to be estimated on each of its orders, with its step-time bound.
  struct Recipe {
    int64_t b;
    Schedule sch;
    int zero;
    Recompute rc;
    bool sp;
    double bound_s;  // step_time_lower_bound over the shape's orders (0 when not pruning by it)
  };

  // Every ZeRO stage, recompute and sequence-parallel setting of one schedule, added to `out`.
  void recipes(int64_t tp, int64_t cp, int64_t dp, int64_t pp, int64_t ep, int64_t b, const Schedule& sch,
               int64_t n_orders, const std::vector<GroupLink>& tp_links, std::vector<Recipe>& out) {
    // The bound of each recompute and sequence-parallel setting, below ZeRO 3 and at it, worked
    // out when first needed.
    double bound_s[3][2][2] = {{{-1, -1}, {-1, -1}}, {{-1, -1}, {-1, -1}}, {{-1, -1}, {-1, -1}}};
    const bool sp_fits = sequence_parallel_by_default(run.layout, model.seq_len);
    for (int zero = 0; zero <= 3; ++zero) {
      if (space.zero ? zero != *space.zero : false) continue;
      if (zero > 0 && dp == 1 && !space.zero) continue;  // nothing to shard over
      if (zero == 2 && pp > 1) {
        // ZeRO-3 / FSDP with pipeline parallel is a real recipe (torchtitan) and is searched.
        reject("ZeRO-2 with pipeline parallel (unsupported by Megatron and DeepSpeed)", n_orders * 3);
        continue;
      }
      for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        if (space.recompute && rc != *space.recompute) continue;
        for (bool sp : {false, true}) {
          if (space.sequence_parallel ? sp != *space.sequence_parallel : (sp && tp == 1)) continue;
          if (sp && !sp_fits) {  // the rule table's sp-needs-tp / sp-divides-seq
            reject("sequence parallel: tp is 1, or tp x cp does not divide the sequence", n_orders);
            continue;
          }
          // Not given, the other commands take sequence_parallel_by_default: what this keeps.
          if (!space.sequence_parallel && sp != sp_fits && space.prune_dominated) {
            reject("dominated: sequence parallel off (same traffic, more memory and time)", n_orders);
            continue;
          }
          res.enumerated += n_orders;
          Recipe r{b, sch, zero, rc, sp, 0.0};
          if (space.prune_by_bound) {
            double& bound = bound_s[int(rc)][sp ? 1 : 0][zero >= 3 ? 1 : 0];
            if (bound < 0) {
              set_recipe(r);
              bound = step_time_lower_bound(model, run.exec, tp, pp, cp, ep, global_batch / (dp * b), tp_links,
                                            cluster.gpu, c, etp());
            }
            r.bound_s = bound;
          }
          out.push_back(r);
        }
      }
    }
  }

  void set_recipe(const Recipe& r) {
    run.exec.micro_batch_size = r.b;
    run.exec.schedule = r.sch.kind;
    run.exec.virtual_stages = r.sch.v;
    run.exec.zero = r.zero;
    run.exec.recompute = r.rc;
    run.exec.sequence_parallel = r.sp;
  }

  // A shape's recipes, the most promising (least bound) first so that its best is found early
  // and the bound prunes the most; each one's memory checked once, then estimated on each order.
  void estimate_recipes(int64_t tp, int64_t cp, int64_t dp, int64_t pp, int64_t ep, std::vector<Recipe>& recipes,
                        const std::vector<std::pair<std::string, Links>>& layouts) {
    const int64_t n_orders = int64_t(layouts.size());
    if (space.prune_by_bound)
      std::stable_sort(recipes.begin(), recipes.end(),
                       [](const Recipe& a, const Recipe& b) { return a.bound_s < b.bound_s; });
    for (const Recipe& r : recipes) {
      set_recipe(r);
      // Before the memory check, which costs more: a pruned recipe is not counted as fitting or not.
      if (space.prune_by_bound &&
          loses_by_bound(double(global_batch) * double(model.seq_len) / r.bound_s, {tp, pp, cp, ep})) {
        reject("pruned: slower at its bound than the best at its tp and pp and the best kept", n_orders);
        continue;
      }
      // Memory does not depend on the order: check it once.
      const auto mem = stage_memory(model, run.exec, {tp, pp, dp, overhead, cp, ep, etp()});
      double peak = 0;
      for (const auto& s : mem) peak = std::max(peak, s.total_bytes());
      if (peak > cluster.gpu.memory_bytes) {
        reject("out of memory", n_orders);
        continue;
      }
      res.feasible += n_orders;
      for (const auto& [order, links] : layouts) {
        run.layout.order = order;
        ++res.estimated;
        keep(estimate_without_links(run, links, mem, c), {tp, pp, cp, ep}, links);
      }
    }
  }

  // The most tokens per second estimated so far in each group of shapes the rationale's
  // questions need exact (tp and pp fixed or not, cp and ep 1 or free): a tp, a pp, and whether
  // cp and ep are 1. What the bound prunes by.
  using Group = std::array<int64_t, 4>;
  static Group group_of(const std::array<int64_t, 4>& shape) {
    return {shape[0], shape[1], shape[2] == 1, shape[3] == 1};
  }
  std::map<Group, double> best_tokens_in_group;

  // Whether no candidate of at most `tokens_per_s` of this shape can be kept: the best of its
  // group is faster and so is the last of the best `top` (the margin covers rounding between
  // bound and estimate).
  bool loses_by_bound(double tokens_per_s, const std::array<int64_t, 4>& shape) const {
    const double most = tokens_per_s * (1 + 1e-9);
    const auto known = best_tokens_in_group.find(group_of(shape));
    if (known == best_tokens_in_group.end() || known->second <= most) return false;
    return !res.best.empty() && int(res.best.size()) >= top && res.best.back().tokens_per_s > most;
  }

  // Whether keep() stores `e` anywhere: the best of its shape so far, or a place among the best
  // `top` (a better order of a kept layout, or a new layout).
  bool kept(const Estimate& e, const std::array<int64_t, 4>& shape_key) const {
    const auto shape = res.best_per_shape.find(shape_key);
    if (shape == res.best_per_shape.end() || better_estimate(e, shape->second)) return true;
    if (!space.order) {
      const auto it = std::find_if(res.best.begin(), res.best.end(),
                                   [&](const Estimate& k) { return same_but_order(k.run, e.run); });
      if (it != res.best.end()) return better_estimate(e, *it);
    }
    return int(res.best.size()) < top || better_estimate(e, res.best.back());
  }

  // The best per shape (for the rationale's narrower questions) and the best `top` overall. The
  // candidate comes without its links: only a kept one gets a copy (each group's node list is
  // long on a large cluster, and most candidates are dropped).
  void keep(Estimate e, const std::array<int64_t, 4>& shape_key, const Links& links) {
    double& in_group = best_tokens_in_group.try_emplace(group_of(shape_key), 0.0).first->second;
    in_group = std::max(in_group, e.tokens_per_s);
    if (!kept(e, shape_key)) {
      if (!space.order) merge_order(res.best, e, better_estimate);  // its order may still be listed
      return;
    }
    e.links = links;
    const auto better = better_estimate;
    // Strictly better only, as a search of this shape alone with top 1 keeps the first.
    auto [shape, added] = res.best_per_shape.try_emplace(shape_key, e);
    if (!added && better(e, shape->second)) shape->second = e;
    if (!space.order && merge_order(res.best, e, better)) return;
    if (int(res.best.size()) < top || better(e, res.best.back())) {
      auto at = std::upper_bound(res.best.begin(), res.best.end(), e, better);
      res.best.insert(at, std::move(e));
      if (int(res.best.size()) > top) res.best.pop_back();
    }
  }

  // The data-parallel shapes of a (tp, pp): cp, then dp from the world, then ep, each with its
  // orders, micro-batch sizes and schedules.
  void shapes(int64_t tp, int64_t pp) {
    const int64_t world = cluster.world_size();
    for (int64_t cp : all_divisors(world / (tp * pp))) {
      if (space.size(Dim::CP) && cp != *space.size(Dim::CP)) continue;
      if (cp > 1 && !space.size(Dim::CP) && model.seq_len < cp * space.min_tokens_per_cp_rank) {
        reject("pruned: cp leaves fewer than min tokens per rank (blocks too small to hide the ring)");
        continue;
      }
      run.layout.cp = cp;
      if (!holds("cp-divides-sequence")) {
        reject("sequence not divisible by 2 x cp");
        continue;
      }
      const int64_t dp = world / (tp * pp * cp);
      if (space.size(Dim::DP) && dp != *space.size(Dim::DP)) continue;
      if (global_batch % dp != 0) {
        reject("global batch not divisible by dp");
        continue;
      }
      for (int64_t ep : model.is_moe() ? all_divisors(model.experts) : std::vector<int64_t>{1}) {
        if (space.size(Dim::EP) && ep != *space.size(Dim::EP)) continue;
        run.layout = Layout{tp, cp, dp, pp, default_order(cp, ep), ep, etp()};
        if (!holds("expert-grid-divides-ranks")) {
          reject("ep x etp does not divide tp x cp x dp");
          continue;
        }
        const auto layouts = distinct_orders(tp, cp, dp, pp, ep);
        std::vector<GroupLink> tp_links;
        for (const auto& [order, links] : layouts) tp_links.push_back(links.tp.link);
        std::vector<Recipe> found;
        for (int64_t b : all_divisors(global_batch / dp)) {
          if (space.micro_batch ? b != *space.micro_batch : b > space.max_micro_batch) continue;
          for (const Schedule& sch : schedules(pp, global_batch / (dp * b), int64_t(layouts.size())))
            recipes(tp, cp, dp, pp, ep, b, sch, int64_t(layouts.size()), tp_links, found);
        }
        estimate_recipes(tp, cp, dp, pp, ep, found, layouts);
      }
    }
  }
};

}  // namespace

SearchResult search(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                    const SearchSpace& space, int top, double overhead, const CostConstants& c) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult res;
  res.space = space;
  Searcher s{model, cluster, global_batch, space, top, overhead, c, res, {}};
  s.run.model = model;
  s.run.cluster = cluster;
  s.run.exec = space.settings;  // the searched settings are set per candidate
  s.run.exec.global_batch_size = global_batch;
  s.run.cost = c;

  const int64_t world = cluster.world_size();
  for (const Dimension& d : dimensions())
    if (const auto& fixed = space.size(d.dim); fixed && (*fixed <= 0 || world % *fixed != 0))
      s.reject(std::string(d.name) + " " + std::to_string(*fixed) + " does not divide the " + std::to_string(world) +
               " GPUs");
  for (int64_t tp : all_divisors(world)) {
    if (space.size(Dim::TP) && tp != *space.size(Dim::TP)) continue;
    if (!tp_divides_model(model, tp)) {
      s.reject("tp does not divide heads or ffn");
      continue;
    }
    for (int64_t pp : all_divisors(world / tp)) {
      if (space.size(Dim::PP) && pp != *space.size(Dim::PP)) continue;
      if (pp > model.layers + pipeline_split_extra_units(space.settings)) {
        s.reject("pp exceeds layers");
        continue;
      }
      s.shapes(tp, pp);
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace trident::plan
