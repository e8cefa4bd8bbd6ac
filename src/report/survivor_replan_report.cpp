#include "report/survivor_replan_report.h"

#include <fmt/format.h>

#include "plan/rationale.h"

namespace trident {

namespace {

std::string batch_line(const plan::Estimate& e) {
  const ExecutionSpec& x = e.run.exec;
  return fmt::format("global batch {} = micro-batch {} x {} micro-batches x dp {}{}", x.global_batch_size,
                     x.micro_batch_size, e.micro_batches, e.run.layout.dp,
                     e.run.layout.cp > 1 ? fmt::format(" (x cp {} sharing each sequence)", e.run.layout.cp) : "");
}

nlohmann::json estimate_json(const plan::Estimate& e) {
  const ExecutionSpec& x = e.run.exec;
  return {{"layout", plan::short_layout(e)},
          {"tp", e.run.layout.tp},
          {"pp", e.run.layout.pp},
          {"dp", e.run.layout.dp},
          {"cp", e.run.layout.cp},
          {"ep", e.run.layout.ep},
          {"gpus", e.run.layout.world_size()},
          {"nodes", e.run.cluster.nodes},
          {"global_batch_size", x.global_batch_size},
          {"micro_batch_size", x.micro_batch_size},
          {"micro_batches", e.micro_batches},
          {"step_s", e.time.step},
          {"tokens_per_s", e.tokens_per_s},
          {"memory_gib", e.peak_memory().total_bytes() / double(1 << 30)}};
}

}  // namespace

std::string survivor_replan_text(const plan::SurvivorPlan& r) {
  const plan::Estimate& o = r.original;
  std::string s = fmt::format("Replan for the GPUs left: {} nodes = {} GPUs ({})\n", r.survivors.nodes,
                              r.survivors.gpus, r.survivors.how);
  s += fmt::format("  was: {} on {} GPUs: step {:.4g} s, {:.0f} tokens/s; {}\n", plan::short_layout(o),
                   o.run.layout.world_size(), o.time.step, o.tokens_per_s, batch_line(o));
  if (!r.best) {
    s += fmt::format("  now: no layout of {} fits on {} nodes or fewer ({} counts of nodes, {} searches); rejected on {} "
                     "nodes:",
                     o.run.model.name, r.survivors.nodes, r.node_counts_tried, r.batches_tried, r.survivors.nodes);
    for (const auto& [why, n] : r.search.rejected) s += fmt::format(" {} x {};", n, why);
    return s + "\n";
  }
  const plan::Estimate& b = *r.best;
  s += fmt::format("  now: {} on {} GPUs ({} of the {} nodes left: the fastest of {} counts of nodes tried{}): step {:.4g} "
                   "s, {:.0f} tokens/s, {:.1f} GiB on the most loaded GPU; {}\n",
                   plan::short_layout(b), b.run.layout.world_size(), r.nodes_used, r.survivors.nodes,
                   r.node_counts_tried, r.nodes_used < r.survivors.nodes ? ", the others stand by" : "", b.time.step,
                   b.tokens_per_s, b.peak_memory().total_bytes() / double(1 << 30), batch_line(b));
  if (r.policy == plan::BatchPolicy::Keep)
    s += fmt::format("  batch (--batch keep): the same global batch {} and learning rate; {} micro-batches per replica "
                     "instead of {} ({}); the data order continues unchanged (sequence i of step s is the sampler's "
                     "(seed, s, i) whatever the layout)\n",
                     r.batch_after, b.micro_batches, o.micro_batches,
                     b.micro_batches * b.run.exec.micro_batch_size > o.micro_batches * o.run.exec.micro_batch_size
                         ? "more accumulation"
                         : "the same sequences per replica or fewer");
  else
    s += fmt::format("  batch (--batch scale): global batch {} x {} / {} nodes = {}{}; learning rate x {:.4f} ({} rule: "
                     "{}); each later step draws sequences 0..{} of the sampler's (seed, step, i): fresh draws, none a "
                     "repeat of a trained step, the original's sequences {}..{} of those steps never drawn\n",
                     r.batch_before, r.nodes_used, o.run.cluster.nodes,
                     r.batch_before * r.nodes_used / std::max<int64_t>(o.run.cluster.nodes, 1),
                     r.batch_after < r.batch_before * r.nodes_used / std::max<int64_t>(o.run.cluster.nodes, 1)
                         ? fmt::format(", lowered to {} (the largest that fits)", r.batch_after)
                         : "",
                     r.lr_factor, to_string(r.rule),
                     r.rule == plan::LrRule::Linear ? fmt::format("B'/B = {}/{}", r.batch_after, r.batch_before)
                                                    : fmt::format("sqrt(B'/B) = sqrt({}/{})", r.batch_after, r.batch_before),
                     r.batch_after - 1, r.batch_after, r.batch_before - 1);
  s += fmt::format("  slowdown: step {:.4g} s / {:.4g} s = x{:.3f}; tokens/s {:.0f} / {:.0f} = x{:.3f}: the same tokens "
                   "take x{:.3f} as long\n",
                   b.time.step, o.time.step, r.step_ratio, b.tokens_per_s, o.tokens_per_s, r.throughput_ratio,
                   r.time_to_train_ratio);
  return s;
}

nlohmann::json survivor_replan_json(const plan::SurvivorPlan& r) {
  nlohmann::json j = {{"survivors",
                       {{"nodes", r.survivors.nodes},
                        {"gpus", r.survivors.gpus},
                        {"idle_gpus", r.survivors.idle_gpus},
                        {"how", r.survivors.how}}},
                      {"original", estimate_json(r.original)},
                      {"batch_policy", to_string(r.policy)},
                      {"global_batch_before", r.batch_before},
                      {"batches_tried", r.batches_tried},
                      {"node_counts_tried", r.node_counts_tried}};
  if (!r.best) {
    j["replan"] = nullptr;
    j["rejected"] = r.search.rejected;
    return j;
  }
  j["replan"] = estimate_json(*r.best);
  j["global_batch_after"] = r.batch_after;
  j["nodes_used"] = r.nodes_used;
  j["lr_rule"] = r.policy == plan::BatchPolicy::Scale ? nlohmann::json(to_string(r.rule)) : nlohmann::json(nullptr);
  j["lr_factor"] = r.lr_factor;
  j["step_ratio"] = r.step_ratio;
  j["throughput_ratio"] = r.throughput_ratio;
  j["time_to_train_ratio"] = r.time_to_train_ratio;
  return j;
}

}  // namespace trident
