#include "plan/lint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "core/layout_rules.h"
#include "core/units.h"
#include "plan/search.h"

namespace trident::plan {

std::string to_string(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Info: return "info";
  }
  return "?";
}

bool LintResult::has_errors() const {
  for (const auto& f : findings)
    if (f.severity == Severity::Error) return true;
  return false;
}

bool is_shape_code(const std::string& code) {
  const LayoutRule* rule = find_layout_rule(code.c_str());
  return rule && rule->kind != RuleKind::Layout;
}

namespace {

std::string g(double bytes) { return fmt::format("{:.1f} GiB", gib(bytes)); }
std::string ms(double s) { return fmt::format("{:.1f} ms", s * 1e3); }

void add(std::vector<Finding>& out, Severity s, std::string code, std::string message, std::string fix) {
  out.push_back({s, std::move(code), std::move(message), std::move(fix)});
}

// "tp-dp-pp" with dp and tp swapped: "dp-tp-pp".
std::string swap_in_order(const std::string& order, const std::string& a, const std::string& b) {
  std::vector<std::string> tokens;
  size_t start = 0;
  while (true) {
    size_t dash = order.find('-', start);
    tokens.push_back(order.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  for (auto& t : tokens) t = t == a ? b : t == b ? a : t;
  return fmt::format("{}", fmt::join(tokens, "-"));
}

std::string memory_breakdown(const StageMemory& m, int64_t v) {
  return fmt::format("weights {} + gradients {} + optimizer states {} + activations {} ({:g} micro-batch "
                     "chunks in flight x {:.3g} layers x {:.0f} MiB{}) + overhead {}",
                     g(m.weights_bytes), g(m.gradients_bytes), g(m.optimizer_bytes), g(m.activations_bytes),
                     m.in_flight, double(m.layers) / double(v),
                     m.per_layer_activation_bytes / kMiB,
                     m.logits_bytes > 0 ? fmt::format(", logits {}", g(m.logits_bytes)) : "", g(m.overhead_bytes));
}

// The execution settings the recipe search varies, as the flags that set them.
std::vector<std::string> recipe_flags(const ExecutionSpec& x) {
  std::vector<std::string> f = {fmt::format("--micro-batch-size {}", x.micro_batch_size),
                                "--schedule " + to_string(x.schedule), fmt::format("--zero {}", x.zero),
                                "--recompute " + to_string(x.recompute),
                                x.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel"};
  if (x.schedule == ScheduleKind::Interleaved) f.push_back(fmt::format("--virtual-stages {}", x.virtual_stages));
  return f;
}

// The flags of `to` that differ from `from`.
std::vector<std::string> changed_flags(const ExecutionSpec& from, const ExecutionSpec& to) {
  const auto a = recipe_flags(from), b = recipe_flags(to);
  std::vector<std::string> out;
  for (const auto& flag : b)
    if (std::find(a.begin(), a.end(), flag) == a.end()) out.push_back(flag);
  return out;
}

struct RecipeChange {
  std::vector<std::string> flags;
  Estimate estimate;
};

// The recipe search over this layout (tp, pp, dp, cp, ep, order and the stack's settings fixed):
// the fastest fitting recipe, and the fitting one that changes the fewest settings of `run` (then
// the fastest) among those whose step is at most `slack` times the fastest. Empty when nothing
// fits.
struct RecipeSearch {
  std::optional<Estimate> fastest;
  std::optional<RecipeChange> cheapest;
};
RecipeSearch recipe_search(const RunSpec& run, double overhead, const CostConstants& c, double slack) {
  RecipeSearch out;
  SearchSpace space;
  space.fix_layout(run.layout);
  space.use_stack(run.exec);
  space.prune_dominated = false;  // sequence parallel off is a valid (if slower) answer here
  const SearchResult res = search(run.model, run.cluster, run.exec.global_batch_size, space, 100000, overhead, c);
  if (res.best.empty()) return out;
  out.fastest = res.best.front();
  const double limit = slack * res.best.front().time.step;
  for (const Estimate& e : res.best) {
    if (e.time.step > limit) break;  // best first
    auto flags = changed_flags(run.exec, e.run.exec);
    if (!out.cheapest || flags.size() < out.cheapest->flags.size()) out.cheapest = RecipeChange{std::move(flags), e};
  }
  return out;
}

std::string change_text(const RecipeChange& ch) {
  return fmt::format("{} ({} setting{} changed: {} per GPU, step {:.3f} s)", fmt::join(ch.flags, " "), ch.flags.size(),
                     ch.flags.size() == 1 ? "" : "s", g(ch.estimate.peak_memory().total_bytes()), ch.estimate.time.step);
}

std::string memory_fix(const RunSpec& run, double overhead, const CostConstants& c) {
  // Any fitting recipe will do: the one that changes least (then the fastest of those).
  const auto ch = recipe_search(run, overhead, c, 1e30).cheapest;
  if (!ch) return "no recipe fits this layout: shard the model further (raise --pp, or --tp inside a node), or use "
                  "GPUs with more memory";
  return "the cheapest change that fits (from the recipe search for this layout): " + change_text(*ch);
}

// What keeps each TP group inside one NVLink domain of D GPUs, from the cause: an order that
// does not put tp first, a tp above D, or a tp that does not divide D (tp 16 of a 72-GPU NVL72
// rack: every group that straddles two racks).
std::string tp_domain_fix(const RunSpec& run, const std::string& domain) {
  const Layout& l = run.layout;
  const int64_t D = run.cluster.gpus_per_nvlink_domain(), gpn = run.cluster.gpus_per_node;
  std::vector<std::string> fixes;
  if (l.order.rfind("tp", 0) != 0)
    fixes.push_back("put tp first in --order (e.g. --order " + default_order(l.cp, l.ep) +
                    "), so each TP group holds neighbouring GPUs");
  if (l.tp > D) {
    fixes.push_back(fmt::format("--tp {} or less (the GPUs of one {}), and add --pp for the rest", D, domain));
  } else if (D % l.tp != 0) {
    std::vector<std::string> tps;
    for (int64_t t = 2; t <= D; ++t)
      if (D % t == 0 && l.world_size() % t == 0 && tp_divides_model(run.model, t)) tps.push_back(std::to_string(t));
    std::string fix = fmt::format("tp {} does not divide the {} GPUs of an {}, so some TP groups straddle two", l.tp, D,
                                  domain);
    if (!tps.empty()) fix += ": use --tp " + join_choices(tps) + " (they divide it and the model's heads)";
    for (int64_t h = run.cluster.hosts_per_nvlink_domain - 1; h >= 1 && gpn > 0; --h)
      if ((h * gpn) % l.tp == 0) {
        fix += fmt::format("{} --hosts-per-nvlink-domain {} ({} hosts of {} GPUs = {} GPUs per domain, which tp {} "
                           "divides)",
                           tps.empty() ? ": use" : ", or", h, h, gpn, h * gpn, l.tp);
        break;
      }
    fixes.push_back(fix);
  }
  if (fixes.empty())
    return fmt::format("keep TP inside the {}: --tp {} or less with tp first in --order, and add --pp for the rest",
                       domain, D);
  return fmt::format("keep TP inside the {}: {}", domain, fmt::join(fixes, "; "));
}

}  // namespace

LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead) {
  return lint_run(run, shape_problems, overhead, cost_table(run));
}

namespace {

// What every check of an estimated run reads.
struct Checked {
  const RunSpec& run;
  const Estimate& e;
  double overhead;
  const CostConstants& c;
  int64_t v;           // virtual stages (1 unless interleaved)
  int64_t mb;          // micro-batches per pipeline
  std::string domain;  // "node", or "NVLink domain" on a rack of hosts sharing one NVLink fabric
  // One finding each (or none), in the order lint reports them.
  void check_uneven_stages(std::vector<Finding>& f) const;
  void check_tp_link(std::vector<Finding>& f) const;
  void check_cp_link(std::vector<Finding>& f) const;
  void check_ep_link(std::vector<Finding>& f) const;
  void check_memory(std::vector<Finding>& f) const;
  void check_recipe(std::vector<Finding>& f) const;
  void check_micro_batches(std::vector<Finding>& f) const;
  void check_activations_in_flight(std::vector<Finding>& f) const;
  void check_group_topology(std::vector<Finding>& f) const;
  void check_thin_stages(std::vector<Finding>& f) const;
};

// uneven-stages: the layers do not divide over the chunks.
void Checked::check_uneven_stages(std::vector<Finding>& f) const {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  // Uneven split.
  if (m.layers % (l.pp * v) != 0 && run.exec.pipeline_layout.empty()) {
    auto chunks = chunk_layers(m.layers, l.pp, v);
    add(f, Severity::Info, "uneven-stages",
        fmt::format("{} layers over pp {} x v {} = {} chunks do not divide evenly: chunks hold {} to {} layers",
                    m.layers, l.pp, v, l.pp * v, *std::min_element(chunks.begin(), chunks.end()),
                    *std::max_element(chunks.begin(), chunks.end())),
        "fine if intended; the slowest stage paces the pipeline");
  }
}

// tp-crosses-nodes: TP off the NVLink domain.
void Checked::check_tp_link(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  // TP off the NVLink domain (one node, or a rack of hosts sharing one NVLink fabric).
  const GroupLink& tpl = e.links.tp.link;
  if (l.tp > 1 && (tpl.crosses_domains() || tpl.kind != LinkKind::NVLink)) {
    const StageTime& st = e.stages[e.pipeline.slowest_stage];
    const double fwd = (st.compute_forward_s + st.compute_backward_s);
    add(f, tp_crosses_domains(l.tp, tpl) ? Severity::Error : Severity::Warning, "tp-crosses-nodes",
        fmt::format("TP groups of {} GPUs run on {} at {:.3g} GB/s per GPU{}: {} of {} TP groups leave their {} "
                    "({} GPUs); TP all-reduces take {} per micro-batch against {} of compute ({:.0f}% of the step)",
                    l.tp, to_string(tpl.kind), gbps(tpl.bandwidth_Bps),
                    tpl.crosses_domains() ? fmt::format(" across {} {}s", tpl.domain_count(), domain) : "",
                    e.links.tp.groups_crossing_domains, e.links.tp.groups, domain,
                    run.cluster.gpus_per_nvlink_domain(), ms(st.tp_comm_s), ms(fwd),
                    100 * e.time.tp_comm / e.time.step),
        tpl.crosses_domains() ? tp_domain_fix(run, domain)
                              : "use NVLink-connected GPUs for TP, or lower --tp and add --pp");
  }
}

// cp-crosses-domain: the CP ring on the network.
void Checked::check_cp_link(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  // Context parallel: the ring passes KV blocks every layer; on the network they may no longer
  // hide behind the attention of one block. A warning only when the exposed part is 1% of the
  // step or more (long sequences hide it: Llama 3 ran cp 16 across nodes).
  if (l.cp > 1 && e.links.cp.link.crosses_domains()) {
    const StageTime& st = e.stages[e.pipeline.slowest_stage];
    const bool tp_cp_fits = l.tp * l.cp <= run.cluster.gpus_per_nvlink_domain();
    const bool shows = e.time.cp_comm >= 0.01 * e.time.step;
    add(f, shows ? Severity::Warning : Severity::Info, "cp-crosses-domain",
        fmt::format("CP groups of {} GPUs pass their KV blocks round a ring on {} at {:.3g} GB/s per GPU ({} of {} groups "
                    "leave their {}): {} per micro-batch not hidden behind attention, {:.1f}% of the step; tp {} x cp "
                    "{} = {} GPUs {} the {} GPUs of an NVLink domain",
                    l.cp, to_string(e.links.cp.link.kind), gbps(e.links.cp.link.bandwidth_Bps),
                    e.links.cp.groups_crossing_domains, e.links.cp.groups, domain, ms(st.cp_comm_s),
                    100 * e.time.cp_comm / e.time.step, l.tp, l.cp, l.tp * l.cp, tp_cp_fits ? "fit in" : "exceed",
                    run.cluster.gpus_per_nvlink_domain()),
        tp_cp_fits ? "put cp right after tp in --order (e.g. --order tp-cp-ep-dp-pp) so each CP group stays on NVLink"
                   : fmt::format("fine when the exposed share is small (longer sequences hide more); otherwise lower "
                                 "--tp or --cp so tp x cp <= {}",
                                 run.cluster.gpus_per_nvlink_domain()));
  }
}

// ep-alltoall-slow: the EP all-to-alls on the network.
void Checked::check_ep_link(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  // Expert parallel: two all-to-alls forward and two backward in every MoE layer, exposed.
  if (l.ep > 1 && e.links.ep.link.crosses_domains()) {
    const StageTime& st = e.stages[e.pipeline.slowest_stage];
    add(f, Severity::Warning, "ep-alltoall-slow",
        fmt::format("EP groups of {} GPUs run their token all-to-alls on {} at {:.3g} GB/s per GPU ({} of {} groups "
                    "leave their {}): {} per micro-batch, {:.1f}% of the step",
                    l.ep, to_string(e.links.ep.link.kind), gbps(e.links.ep.link.bandwidth_Bps),
                    e.links.ep.groups_crossing_domains, e.links.ep.groups, domain, ms(st.ep_comm_s),
                    100 * e.time.ep_comm / e.time.step),
        fmt::format("keep tp x ep inside the {} ({} GPUs): lower --ep (each GPU then holds more experts) or --tp", domain,
                    run.cluster.gpus_per_nvlink_domain()));
  }
}

// out-of-memory, with what breaks it.
void Checked::check_memory(std::vector<Finding>& f) const {
  // Memory.
  const StageMemory& pm = e.peak_memory();
  if (!e.fits) {
    const double states_without_opt = pm.weights_bytes + pm.gradients_bytes + pm.activations_bytes + pm.overhead_bytes;
    const bool optimizer_breaks = states_without_opt <= e.capacity_bytes;
    add(f, Severity::Error, "out-of-memory",
        fmt::format("stage {} needs {} per GPU but the {} has {}: {}{}", pm.stage, g(pm.total_bytes()),
                    run.cluster.gpu.name, g(e.capacity_bytes), memory_breakdown(pm, v),
                    optimizer_breaks
                        ? fmt::format("; without the optimizer states ({} of fp32 master weights, momentum and "
                                      "variance) it would fit: they are what breaks it",
                                      g(pm.optimizer_bytes))
                        : ""),
        memory_fix(run, overhead, c));
  }
}

// slower-than-recipe: the recipe search finds a clearly faster one.
void Checked::check_recipe(std::vector<Finding>& f) const {
  // Slow: the recipe search finds a clearly faster recipe for the same layout and stack.
  if (e.fits) {
    const RecipeSearch rs = recipe_search(run, overhead, c, 1.03);
    if (rs.fastest && rs.cheapest && !rs.cheapest->flags.empty() && rs.fastest->time.step < 0.9 * e.time.step)
      add(f, Severity::Warning, "slower-than-recipe",
          fmt::format("this recipe takes {:.3f} s per step; the recipe search finds {:.3f} s for the same layout and "
                      "stack ({:.0f}% faster): {}",
                      e.time.step, rs.fastest->time.step, 100 * (1 - rs.fastest->time.step / e.time.step),
                      fmt::join(recipe_flags(rs.fastest->run.exec), " ")),
          "the cheapest change within 3% of it: " + change_text(*rs.cheapest));
  }
}

// too-few-microbatches and interleaved-microbatches.
void Checked::check_micro_batches(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  const ExecutionSpec& x = run.exec;
  // Micro-batches.
  if (l.pp > 1 && mb < 2 * l.pp) {
    add(f, Severity::Warning, "too-few-microbatches",
        fmt::format("m = {} micro-batches per pipeline (global batch {} / (micro-batch {} x dp {})) is below "
                    "2 x pp = {}: the pipeline bubble is {:.1f}% of the step",
                    mb, x.global_batch_size, x.micro_batch_size, l.dp, 2 * l.pp,
                    100 * e.time.bubble / e.time.step),
        fmt::format("raise --global-batch-size to {} or more, lower --micro-batch-size or --dp, or use "
                    "--schedule interleaved",
                    2 * l.pp * x.micro_batch_size * l.dp));
  }
  if (x.schedule == ScheduleKind::Interleaved && l.pp > 1 && mb % l.pp != 0)
    add(f, Severity::Warning, "interleaved-microbatches",
        fmt::format("the interleaved schedule runs micro-batches in groups of pp = {}, but m = {} is not a multiple "
                    "of it (Megatron refuses this)",
                    l.pp, mb),
        fmt::format("use a global batch that gives m = {} or {} micro-batches per pipeline", mb / l.pp * l.pp,
                    (mb / l.pp + 1) * l.pp));
}

// activations-in-flight: the schedule keeps too many chunks' activations.
void Checked::check_activations_in_flight(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  const ExecutionSpec& x = run.exec;
  const StageMemory& pm = e.peak_memory();
  if (pm.activations_bytes > 0.5 * pm.total_bytes() && pm.in_flight > double(l.pp * v) &&
      pm.total_bytes() > 0.9 * e.capacity_bytes) {
    add(f, Severity::Warning, "activations-in-flight",
        fmt::format("stage {} holds the activations of {:g} micro-batch chunks at once ({} of its {}): {}",
                    pm.stage, pm.in_flight, g(pm.activations_bytes), g(pm.total_bytes()),
                    x.schedule == ScheduleKind::GPipe
                        ? fmt::format("GPipe keeps all m = {} micro-batches in flight until their backward pass", mb)
                        : fmt::format("interleaving keeps p v + p - 1 = {} chunks in flight on the first stage, "
                                      "(p - 1) more than 1F1B",
                                      l.pp * v + l.pp - 1)),
        x.schedule == ScheduleKind::GPipe
            ? "use --schedule 1f1b (at most pp micro-batches in flight) or --recompute selective"
            : "use fewer --virtual-stages or --schedule 1f1b, or --recompute selective");
  }
}

// group-topology-mismatch: a group holds the NVLink domain while another crosses nodes.
void Checked::check_group_topology(std::vector<Finding>& f) const {
  const Layout& l = run.layout;
  // Groups against the hardware: a dimension holds the NVLink domain while another one crosses
  // nodes. The model answers whether that is a mistake: swap the two in the order string and
  // re-estimate; warn when the swap makes the step clearly faster.
  {
    struct DimCost {
      Dim dim;
      int64_t size;
      double exposed_s;  // its time on the step's critical path
      const DimLink* link;
    };
    const std::vector<DimCost> dims = {{Dim::TP, l.tp, e.time.tp_comm, &e.links.tp},
                                       {Dim::PP, l.pp, e.time.pp_comm, &e.links.pp},
                                       {Dim::DP, l.dp, e.time.dp_comm, &e.links.dp}};
    for (const auto& inner : dims) {
      if (inner.size <= 1 || inner.link->link.crosses_domains()) continue;
      for (const auto& outer : dims) {
        if (outer.size <= 1 || !outer.link->link.crosses_domains()) continue;
        RunSpec swapped = run;
        swapped.layout.order = swap_in_order(l.order, to_string(inner.dim), to_string(outer.dim));
        Problems invalid;  // e.g. the swap takes dp away from ep
        validate_layout(swapped.layout, invalid);
        if (!invalid.empty()) continue;
        const Estimate alt = estimate(swapped, overhead, c);
        if (alt.time.step > 0.97 * e.time.step) continue;
        // Never recommend an order that puts TP across nodes (the chapter's first rule), even if
        // the model finds it faster: its collectives are on every layer's critical path.
        if (l.tp > 1 && alt.links.tp.link.crosses_nodes() && !e.links.tp.link.crosses_nodes()) continue;
        add(f, Severity::Warning, "group-topology-mismatch",
            fmt::format("{} groups ({} GPUs) hold the {} domain ({:.3g} GB/s, {} of {} per step) while {} groups ({} "
                        "GPUs) cross nodes on {} at {:.3g} GB/s ({} per step); swapped (order {}) the step would take "
                        "{:.3f} s instead of {:.3f} s ({:.0f}% faster)",
                        to_string(inner.dim), inner.size, to_string(inner.link->link.kind),
                        gbps(inner.link->link.bandwidth_Bps), ms(inner.exposed_s), to_string(inner.dim),
                        to_string(outer.dim), outer.size, to_string(outer.link->link.kind),
                        gbps(outer.link->link.bandwidth_Bps), ms(outer.exposed_s), swapped.layout.order,
                        alt.time.step, e.time.step, 100 * (1 - alt.time.step / e.time.step)),
            fmt::format("put {} before {} in --order (fastest first): --order {}", to_string(outer.dim),
                        to_string(inner.dim), swapped.layout.order));
      }
    }
  }
}

// stage-too-thin: a stage's compute against its pipeline sends.
void Checked::check_thin_stages(std::vector<Finding>& f) const {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  // Thin stages.
  if (l.pp > 1) {
    const auto layers = stage_layers(m.layers, l.pp, run.exec);
    const int64_t thinnest = *std::min_element(layers.begin(), layers.end());
    const StageTime& st = e.stages[std::min_element(layers.begin(), layers.end()) - layers.begin()];
    const double compute = st.compute_forward_s + st.compute_backward_s;
    const double sends = st.pp_comm_s;
    if (thinnest < 4 || compute < 10 * sends) {
      add(f, Severity::Warning, "stage-too-thin",
          fmt::format("stage {} holds {} layer{} ({} chunk{} of {:.3g}): {} of compute per micro-batch against {} of "
                      "pipeline sends ({:.1f}x){}",
                      st.stage, thinnest, thinnest == 1 ? "" : "s", v, v == 1 ? "" : "s", double(thinnest) / v,
                      ms(compute), ms(sends), sends > 0 ? compute / sends : 0.0,
                      thinnest < 4 ? "; the source chapter asks for at least 4 layers per stage" : ""),
          fmt::format("use fewer stages (--pp {} or less gives 4+ layers each) or fewer virtual stages, and more "
                      "--dp or --tp instead",
                      std::max<int64_t>(1, m.layers / 4)));
    }
  }
}

}  // namespace

LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead,
                    const CostConstants& c) {
  LintResult out;
  out.run = run;
  auto& f = out.findings;
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  for (const Problem& p : shape_problems) add(f, Severity::Error, p.code, p.what, p.fix);

  if (l.tp > 0 && m.vocab > 0) {
    const int64_t padded = padded_vocab(m.vocab, l.tp);
    if (padded != m.vocab)
      add(f, Severity::Info, "vocab-padded",
          fmt::format("vocabulary {} is padded to {} (a multiple of 128 x tp {} = {}): {} extra rows, {} per GPU "
                      "of the embedding shard",
                      m.vocab, padded, l.tp, 128 * l.tp, padded - m.vocab, padded / l.tp),
          "nothing to do (Megatron pads the same way); a vocabulary that is a multiple of 128 x tp avoids it");
  }

  if (shape_problems.empty()) {
    const Estimate e = estimate(run, overhead, c);
    const int64_t v = run.exec.schedule == ScheduleKind::Interleaved ? run.exec.virtual_stages : 1;
    const Checked k{run, e, overhead, c, v, e.micro_batches,
                    run.cluster.hosts_per_nvlink_domain > 1 ? "NVLink domain" : "node"};
    for (auto check : {&Checked::check_uneven_stages, &Checked::check_tp_link, &Checked::check_cp_link,
                       &Checked::check_ep_link, &Checked::check_memory, &Checked::check_recipe,
                       &Checked::check_micro_batches, &Checked::check_activations_in_flight,
                       &Checked::check_group_topology, &Checked::check_thin_stages})
      (k.*check)(f);
    out.estimate = e;
  }
  std::stable_sort(f.begin(), f.end(), [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return out;
}

namespace {
RunSpec resolve_all(const OptionValues& values, Problems& all) {
  RunSpec r;
  r.model = resolve_model(values, all);
  r.cluster = resolve_cluster(values, all);
  r.layout = resolve_layout(values, r.cluster, all);
  r.exec = resolve_execution(values, all, default_stack(r.cluster));
  default_sequence_parallel(values, r);  // as plan's search takes it
  r.cost = resolve_cost(values, r.cluster.gpu, all);
  return r;
}
}  // namespace

std::vector<Finding> defaults_used(const OptionValues& values, const RunSpec& run) {
  // Nothing is filled in from a search: what the values leave out is what `trident train` and
  // `simulate` run (ExecutionSpec's defaults, or the --stack preset's), and the finding says so.
  const ExecutionSpec& x = run.exec;
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"micro-batch-size", fmt::format("--micro-batch-size {}", x.micro_batch_size)},
      {"schedule", "--schedule " + to_string(x.schedule)},
      {"virtual-stages", fmt::format("--virtual-stages {}", x.virtual_stages)},
      {"zero", fmt::format("--zero {}", x.zero)},
      {"recompute", "--recompute " + to_string(x.recompute)},
      {"sequence-parallel", x.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel"},
      {"precision", "--precision " + to_string(x.precision)},
      {"grad-bits", fmt::format("--grad-bits {}", x.grad_bits)},
      {"attention", "--attention " + to_string(x.attention)},
      {"overlap", "--overlap " + to_string(overlap_in_effect(x.overlap, x.schedule))},
  };
  std::vector<std::string> flags;
  for (const auto& [key, flag] : settings) {
    if (values.has(key)) continue;
    if (key == "virtual-stages" && x.schedule != ScheduleKind::Interleaved) continue;  // v only matters there
    flags.push_back(flag);
  }
  if (flags.empty()) return {};
  const std::string whose = x.stack.empty()     ? "the runtime's defaults (what trident train runs)"
                            : values.has("stack") ? "the --stack " + x.stack + " preset, else the runtime's defaults"
                                                  : "the stack " + x.stack + " (the default on a GPU cluster), else the "
                                                    "runtime's defaults";
  return {{Severity::Info, "execution-defaults",
           fmt::format("settings not given take {}: {}", whose, fmt::join(flags, " ")),
           "pass them explicitly to check another recipe; `trident plan` with this layout fixed searches them"}};
}

LintResult lint_options(const OptionValues& values, double overhead) {
  Problems all;
  RunSpec r = resolve_all(values, all);
  if (!values.has("global-batch-size"))
    all.add("no global batch size given", "give --global-batch-size (sequences per step; GPT-3 175B used 1536)");
  check_run(r, true, all);
  Problems input;
  std::vector<Problem> shape;
  for (const Problem& p : all.list()) {
    if (is_shape_code(p.code)) shape.push_back(p);
    else input.add(p.what, p.fix, p.code);
  }
  input.throw_if_any();
  const std::vector<Finding> assumed = defaults_used(values, r);
  LintResult result = lint_run(r, shape, overhead);
  result.findings.insert(result.findings.end(), assumed.begin(), assumed.end());
  return result;
}

}  // namespace trident::plan
