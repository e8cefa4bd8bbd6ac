#include "plan/lint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

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
  return code == "world-size" || code == "tp-divides-heads" || code == "tp-divides-ffn" ||
         code == "pp-exceeds-layers" || code == "batch-divisibility";
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

// Variants of the run that a user could switch to, each re-estimated; those that fit go in the fix.
std::string memory_fixes(const RunSpec& run, double overhead, const CostConstants& c) {
  struct Variant {
    std::string flags;
    RunSpec r;
  };
  std::vector<Variant> variants;
  auto with = [&](std::string flags, auto change) {
    RunSpec r = run;
    change(r);
    variants.push_back({std::move(flags), r});
  };
  const ExecutionSpec& x = run.exec;
  if (x.zero < 1 && run.layout.dp > 1) with("--zero 1", [](RunSpec& r) { r.exec.zero = 1; });
  if (x.recompute == Recompute::None && run.layout.tp > 1 && !x.sequence_parallel)
    with("--recompute selective --sequence-parallel", [](RunSpec& r) {
      r.exec.recompute = Recompute::Selective;
      r.exec.sequence_parallel = true;
    });
  if (x.recompute == Recompute::None) with("--recompute selective", [](RunSpec& r) { r.exec.recompute = Recompute::Selective; });
  if (x.recompute != Recompute::Full) with("--recompute full", [](RunSpec& r) { r.exec.recompute = Recompute::Full; });
  if (x.schedule == ScheduleKind::GPipe) with("--schedule 1f1b", [](RunSpec& r) { r.exec.schedule = ScheduleKind::OneFOneB; });
  if (x.micro_batch_size > 1) with("--micro-batch-size 1", [](RunSpec& r) { r.exec.micro_batch_size = 1; });
  if (x.zero < 1 && run.layout.dp > 1 && x.recompute != Recompute::Full)
    with("--zero 1 --recompute full", [](RunSpec& r) {
      r.exec.zero = 1;
      r.exec.recompute = Recompute::Full;
    });
  std::vector<std::string> fits;
  for (const auto& v : variants) {
    const Estimate e = estimate(v.r, overhead, c);
    if (e.fits) fits.push_back(fmt::format("{} ({})", v.flags, g(e.peak_memory().total_bytes())));
  }
  if (fits.empty()) return "shard the model further: raise --pp or --tp (inside a node), or use GPUs with more memory";
  return "any of: " + fmt::format("{}", fmt::join(fits, "; ")) + "; or raise --pp";
}

}  // namespace

LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead) {
  return lint_run(run, shape_problems, overhead, cost_table(run));
}

LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead,
                    const CostConstants& c) {
  LintResult out;
  out.run = run;
  auto& f = out.findings;
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& x = run.exec;
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
    const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
    const int64_t mb = e.micro_batches;

    // Uneven split.
    if (m.layers % (l.pp * v) != 0) {
      auto chunks = chunk_layers(m.layers, l.pp, v);
      add(f, Severity::Info, "uneven-stages",
          fmt::format("{} layers over pp {} x v {} = {} chunks do not divide evenly: chunks hold {} to {} layers",
                      m.layers, l.pp, v, l.pp * v, *std::min_element(chunks.begin(), chunks.end()),
                      *std::max_element(chunks.begin(), chunks.end())),
          "fine if intended; the slowest stage paces the pipeline");
    }

    // TP off the NVLink domain (one node, or a rack of hosts sharing one NVLink fabric).
    const GroupLink& tpl = e.links.tp.link;
    const bool rack = run.cluster.hosts_per_nvlink_domain > 1;
    const std::string domain = rack ? "NVLink domain" : "node";
    if (l.tp > 1 && (tpl.crosses_domains() || tpl.kind != LinkKind::NVLink)) {
      const StageTime& st = e.stages[e.pipeline.slowest_stage];
      const double fwd = (st.compute_forward_s + st.compute_backward_s);
      add(f, tpl.crosses_domains() ? Severity::Error : Severity::Warning, "tp-crosses-nodes",
          fmt::format("TP groups of {} GPUs run on {} at {:.3g} GB/s per GPU{}: {} of {} TP groups leave their {} "
                      "({} GPUs); TP all-reduces take {} per micro-batch against {} of compute ({:.0f}% of the step)",
                      l.tp, to_string(tpl.kind), gbps(tpl.bandwidth_Bps),
                      tpl.crosses_domains() ? fmt::format(" across {} {}s", tpl.domain_count(), domain) : "",
                      e.links.tp.groups_crossing_domains, e.links.tp.groups, domain,
                      run.cluster.gpus_per_nvlink_domain(), ms(st.tp_comm_s), ms(fwd),
                      100 * e.time.tp_comm / e.time.step),
          tpl.crosses_domains()
              ? fmt::format("keep TP inside the {}: --tp {} or less with tp first in --order (e.g. --order tp-dp-pp), "
                            "and add --pp for the rest",
                            domain, run.cluster.gpus_per_nvlink_domain())
              : "use NVLink-connected GPUs for TP, or lower --tp and add --pp");
    }

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
          memory_fixes(run, overhead, c));
    }
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
          const Estimate alt = estimate(swapped, overhead, c);
          if (alt.time.step > 0.97 * e.time.step) continue;
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

    // Thin stages.
    if (l.pp > 1) {
      const auto layers = stage_layers(m.layers, l.pp, v);
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
  r.exec = resolve_execution(values, all);
  return r;
}
}  // namespace

std::vector<Finding> assume_execution(const OptionValues& values, RunSpec& run, double overhead) {
  // The layout is the user's; execution settings they left out are taken from the best-fitting
  // recipe for that layout, and said so.
  const std::vector<std::string> keys = {"micro-batch-size", "schedule", "virtual-stages", "zero", "recompute",
                                         "sequence-parallel"};
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (values.has(k)) continue;
    // v only matters for the interleaved schedule.
    if (k == "virtual-stages" && values.has("schedule") && run.exec.schedule != ScheduleKind::Interleaved) continue;
    missing.push_back(k);
  }
  if (missing.empty()) return {};
  SearchSpace space;
  space.tp = run.layout.tp;
  space.pp = run.layout.pp;
  space.dp = run.layout.dp;
  space.order = run.layout.order;
  space.precision = run.exec.precision;
  space.grad_bits = run.exec.grad_bits;
  if (values.has("micro-batch-size")) space.micro_batch = run.exec.micro_batch_size;
  if (values.has("schedule")) space.schedule = run.exec.schedule;
  if (values.has("virtual-stages")) space.virtual_stages = run.exec.virtual_stages;
  if (values.has("zero")) space.zero = run.exec.zero;
  if (values.has("recompute")) space.recompute = run.exec.recompute;
  if (values.has("sequence-parallel")) space.sequence_parallel = run.exec.sequence_parallel;
  const SearchResult best = search(run.model, run.cluster, run.exec.global_batch_size, space, 1, overhead);
  if (best.best.empty()) return {};
  const ExecutionSpec& x = best.best.front().run.exec;
  run.exec.micro_batch_size = x.micro_batch_size;
  run.exec.schedule = x.schedule;
  run.exec.virtual_stages = x.virtual_stages;
  run.exec.zero = x.zero;
  run.exec.recompute = x.recompute;
  run.exec.sequence_parallel = x.sequence_parallel;
  std::vector<std::string> flags;
  for (const auto& k : missing) {
    if (k == "micro-batch-size") flags.push_back(fmt::format("--micro-batch-size {}", x.micro_batch_size));
    if (k == "schedule") flags.push_back("--schedule " + to_string(x.schedule));
    if (k == "virtual-stages") flags.push_back(fmt::format("--virtual-stages {}", x.virtual_stages));
    if (k == "zero") flags.push_back(fmt::format("--zero {}", x.zero));
    if (k == "recompute") flags.push_back("--recompute " + to_string(x.recompute));
    if (k == "sequence-parallel") flags.push_back(x.sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel");
  }
  return {{Severity::Info, "execution-assumed",
           fmt::format("execution settings not given were taken from the fastest recipe that fits this layout: {}",
                       fmt::join(flags, " ")),
           "pass them explicitly to check another recipe"}};
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
  std::vector<Finding> assumed;
  if (shape.empty()) assumed = assume_execution(values, r, overhead);
  LintResult result = lint_run(r, shape, overhead);
  result.findings.insert(result.findings.end(), assumed.begin(), assumed.end());
  return result;
}

}  // namespace trident::plan
