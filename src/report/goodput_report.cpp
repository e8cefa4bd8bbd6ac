#include "report/goodput_report.h"

#include <fmt/format.h>

#include <cmath>

#include "plan/rationale.h"

namespace trident {

namespace {
std::string gb(double bytes) { return fmt::format("{:.4g} GB", bytes / 1e9); }
std::string pct(double share) { return fmt::format("{:.2f}%", 100 * share); }
}  // namespace

std::string goodput_text(const plan::Goodput& g) {
  const plan::CheckpointSize& c = g.ckpt;
  std::string s;
  if (!g.feasible)
    s += fmt::format("time to train with failures: the run never finishes: each failure loses {:.0f} s, more than the "
                     "{:.0f} s between failures of {} GPUs (lower the failure rate, speed up the start-up or storage, "
                     "or use fewer GPUs)\n",
                     g.lost_per_failure_s, g.mtbf_s, g.gpus);
  else if (g.ideal_s > 0)
    s += fmt::format("time to train with failures: {:.1f} days (90% interval {:.1f}-{:.1f}), goodput {}, against {:.1f} "
                     "days without failures or saves\n",
                     g.days, g.days_low, g.days_high, pct(g.goodput), g.days_ideal);
  else
    s += fmt::format("goodput with failures: {} (give --train-tokens for the days)\n", pct(g.goodput));
  if (!std::isfinite(g.mtbf_s))
    s += fmt::format("  failures: none ({} per 1000 GPU-days, {}): nothing is lost, no save is needed for them\n",
                     g.in.failures_per_1000_gpu_days, g.in.failure_source);
  else
    s += fmt::format("  failures: {:.4g} per 1000 GPU-days ({}) x {} GPUs -> job MTBF = 1 / (rate x GPUs) = {:.0f} s "
                     "({:.2f} h)\n",
                     g.in.failures_per_1000_gpu_days, g.in.failure_source, g.gpus, g.mtbf_s, g.mtbf_s / 3600);
  s += fmt::format("  checkpoint: {} per rank (stage {}: ({:.4g} dense params / dp x cp {:g}{}) x ({:g} B weights + "
                   "{:g} B optimizer per param)); {} from all {} ranks; {} from a node\n",
                   gb(c.bytes_per_rank), c.stage, c.dense_params, c.replicas,
                   c.expert_params > 0 ? fmt::format(" + {:.4g} expert params / edp {:g}", c.expert_params, c.expert_replicas)
                                       : std::string(),
                   c.weight_bytes_per_param, c.optimizer_bytes_per_param, gb(c.total_bytes), g.gpus, gb(c.node_bytes));
  s += fmt::format("  save = load = max({} / {:.4g} GB/s storage ({}) = {:.3g} s, {} / {:.4g} GB/s per node = {:.3g} s) "
                   "= {:.3g} s\n",
                   gb(c.total_bytes), g.in.storage_Bps / 1e9, g.in.storage_source, g.save_aggregate_s, gb(c.node_bytes),
                   g.in.storage_node_Bps / 1e9, g.save_node_s, g.save_s);
  if (std::isfinite(g.mtbf_s))
    s += fmt::format("  interval (Young/Daly): sqrt(2 x save {:.3g} s x MTBF {:.0f} s) = {:.0f} s -> every {} steps of "
                     "{:.3f} s = {:.0f} s\n",
                     g.save_s, g.mtbf_s, g.young_interval_s, g.interval_steps, g.step_s, g.interval_s);
  s += fmt::format("  restart: start-up {:g} s + load {:.3g} s = {:.0f} s; lost per failure = restart + (interval + "
                   "save) / 2 = {:.0f} s\n",
                   g.in.startup_s, g.load_s, g.restart_s, g.lost_per_failure_s);
  if (g.feasible && std::isfinite(g.mtbf_s)) {
    s += fmt::format("  goodput = (1 - lost per failure / MTBF {}) / (1 + save / interval {}) = {}\n",
                     pct(g.failure_share), pct(g.save_overhead), pct(g.goodput));
    if (g.ideal_s > 0)
      s += fmt::format("  days = {:.1f} x (1 + {}) / (1 - {}) = {:.1f}; failures expected = wall time / MTBF = {:.1f}, 90% "
                       "interval (Poisson) {}-{} -> ({:.1f} x (1 + {}) + n x {:.0f} s) = {:.1f}-{:.1f} days\n",
                       g.days_ideal, pct(g.save_overhead), pct(g.failure_share), g.days, g.expected_failures,
                       g.failures_low, g.failures_high, g.days_ideal, pct(g.save_overhead), g.lost_per_failure_s,
                       g.days_low, g.days_high);
  }
  return s;
}

nlohmann::json goodput_json(const plan::Goodput& g) {
  const plan::CheckpointSize& c = g.ckpt;
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {
      {"failures_per_1000_gpu_days", g.in.failures_per_1000_gpu_days},
      {"failure_source", g.in.failure_source},
      {"gpus", g.gpus},
      {"nodes", g.nodes},
      {"mtbf_s", num(g.mtbf_s)},
      {"checkpoint",
       {{"stage", c.stage},
        {"dense_params", c.dense_params},
        {"expert_params", c.expert_params},
        {"replicas", c.replicas},
        {"expert_replicas", c.expert_replicas},
        {"weight_bytes_per_param", c.weight_bytes_per_param},
        {"optimizer_bytes_per_param", c.optimizer_bytes_per_param},
        {"bytes_per_rank", c.bytes_per_rank},
        {"total_bytes", c.total_bytes},
        {"node_bytes", c.node_bytes}}},
      {"storage_gbytes_per_s", g.in.storage_Bps / 1e9},
      {"storage_source", g.in.storage_source},
      {"storage_node_gbytes_per_s", g.in.storage_node_Bps / 1e9},
      {"save_aggregate_s", g.save_aggregate_s},
      {"save_node_s", g.save_node_s},
      {"save_s", g.save_s},
      {"load_s", g.load_s},
      {"startup_s", g.in.startup_s},
      {"restart_s", g.restart_s},
      {"young_interval_s", num(g.young_interval_s)},
      {"step_s", g.step_s},
      {"interval_steps", g.interval_steps},
      {"interval_s", g.interval_s},
      {"lost_per_failure_s", g.lost_per_failure_s},
      {"save_overhead", g.save_overhead},
      {"failure_share", g.failure_share},
      {"feasible", g.feasible},
      {"goodput", g.goodput},
      {"expected_failures", g.expected_failures},
      {"failures_90_interval", {g.failures_low, g.failures_high}},
      {"days_without_failures", g.days_ideal},
      {"days", num(g.days)},
      {"days_90_interval", {num(g.days_low), num(g.days_high)}},
  };
}

std::string ranked_by_goodput_text(const std::vector<plan::RankedByGoodput>& ranked) {
  std::string s = "ranked by goodput (--rank-by goodput): effective tokens/s = tokens/s x goodput\n";
  int i = 0;
  for (const auto& r : ranked)
    s += fmt::format("  #{} {}: {:.0f} tokens/s x goodput {} (checkpoint {} per rank, save {:.3g} s, every {} steps) = "
                     "{:.0f} tokens/s\n",
                     ++i, plan::short_layout(r.estimate), r.estimate.tokens_per_s, pct(r.goodput.goodput),
                     gb(r.goodput.ckpt.bytes_per_rank), r.goodput.save_s, r.goodput.interval_steps,
                     r.effective_tokens_per_s);
  return s;
}

}  // namespace trident
