#include "plan/goodput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "plan/memory_model.h"

namespace trident::plan {

std::vector<OptionDef> resilience_options() {
  return {
      failure_rate_option(),
      {"storage-gbytes-per-s", "cluster", "checkpoint storage bandwidth of the whole cluster, GB/s (save and load)",
       false, "NUM", fmt::format("{:g}: Llama 3's Tectonic, sustained", kLlama3StorageGBps), 1e-9},
      {"storage-node-gbytes-per-s", "cluster", "one node's bandwidth to the checkpoint storage, GB/s", false, "NUM",
       fmt::format("{:g}: two 200 Gb/s storage ports", kDefaultNodeStorageGBps), 1e-9},
      {"restart-startup-s", "cluster",
       "seconds from a failure to the job running again, before loading the checkpoint (detection, rescheduling, "
       "start-up)",
       false, "NUM", fmt::format("{:g}: PyTorch's 10-minute collective timeout", kDefaultRestartStartupS)},
  };
}

ResilienceInputs resolve_resilience(const OptionValues& v, Problems& p) {
  ResilienceInputs r;
  if (auto x = v.get_double("failures-per-1000-gpu-days", p)) {
    r.failures_per_1000_gpu_days = *x;
    r.failure_source = "from " + v.source("failures-per-1000-gpu-days");
  }
  if (auto x = v.get_double("storage-gbytes-per-s", p)) {
    r.storage_Bps = *x * 1e9;
    r.storage_source = "from " + v.source("storage-gbytes-per-s");
  }
  if (auto x = v.get_double("storage-node-gbytes-per-s", p)) r.storage_node_Bps = *x * 1e9;
  if (auto x = v.get_double("restart-startup-s", p)) r.startup_s = *x;
  return r;
}

int64_t nodes_of(const RunSpec& run) {
  const int64_t per_node = std::max<int64_t>(run.cluster.gpus_per_node, 1);
  return (run.layout.world_size() + per_node - 1) / per_node;
}

CheckpointSize checkpoint_size(const RunSpec& run) {
  const ExecutionSpec& e = run.exec;
  const Layout& l = run.layout;
  const StateBytes sb = state_bytes(e);
  // The stages' parameters as the memory model splits them (the overhead plays no part here).
  const std::vector<StageMemory> stages = stage_memory(run.model, e, {l.tp, l.pp, l.dp, 0, l.cp, l.ep, l.etp});
  CheckpointSize c;
  // The persistent weights (what a DP all-gather moves: no FP8 cache) and the optimizer's states.
  c.weight_bytes_per_param = sb.gathered;
  c.optimizer_bytes_per_param = sb.optimizer;
  c.bytes_per_param = sb.gathered + sb.optimizer;
  c.replicas = double(l.dp * l.cp);
  c.expert_replicas = std::max(1.0, double(l.size(Dim::EDP)));  // the expert grid's edp
  const double ranks_per_stage = double(l.world_size()) / double(std::max<int64_t>(l.pp, 1));
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageParams& sp = stages[i].params;
    const double bytes =
        (sp.dense() / c.replicas + sp.expert_params / c.expert_replicas) * c.bytes_per_param;
    c.total_bytes += bytes * ranks_per_stage;
    if (bytes > c.bytes_per_rank) {
      c.bytes_per_rank = bytes;
      c.stage = int64_t(i);
      c.dense_params = sp.dense();
      c.expert_params = sp.expert_params;
    }
  }
  c.node_bytes = double(std::min<int64_t>(run.cluster.gpus_per_node, l.world_size())) * c.bytes_per_rank;
  return c;
}

int64_t poisson_quantile(double mean, double q) {
  if (!(mean > 0)) return 0;
  // Start where the lower tail is negligible (12 standard deviations below) and sum the pmf up.
  const int64_t start = std::max<int64_t>(0, int64_t(std::floor(mean - 12 * std::sqrt(mean) - 10)));
  double cdf = 0;
  for (int64_t k = start;; ++k) {
    cdf += std::exp(double(k) * std::log(mean) - mean - std::lgamma(double(k) + 1));
    if (cdf >= q || k > mean + 40 * std::sqrt(mean) + 100) return k;
  }
}

Goodput goodput(const CheckpointSize& ckpt, const ResilienceInputs& in, int64_t gpus, int64_t nodes, double step_s,
                double ideal_s) {
  Goodput g;
  g.in = in;
  g.ckpt = ckpt;
  g.gpus = gpus;
  g.nodes = nodes;
  g.step_s = step_s;
  g.ideal_s = ideal_s;
  g.save_aggregate_s = ckpt.total_bytes / in.storage_Bps;
  g.save_node_s = ckpt.node_bytes / in.storage_node_Bps;
  g.save_s = std::max(g.save_aggregate_s, g.save_node_s);
  g.load_s = g.save_s;
  g.mtbf_s = job_mtbf_s(in.failures_per_1000_gpu_days, gpus);
  g.young_interval_s = young_daly_interval_s(g.save_s, g.mtbf_s);
  g.interval_steps = interval_in_steps(g.young_interval_s, step_s);
  g.interval_s = double(g.interval_steps) * step_s;
  g.restart_s = in.startup_s + g.load_s;
  g.lost_per_failure_s = g.restart_s + (g.interval_s + g.save_s) / 2;
  g.save_overhead = g.interval_s > 0 ? g.save_s / g.interval_s : 0;
  g.failure_share = std::isfinite(g.mtbf_s) ? g.lost_per_failure_s / g.mtbf_s : 0;
  g.feasible = g.failure_share < 1;
  const double with_saves_s = ideal_s * (1 + g.save_overhead);
  g.goodput = g.feasible ? (1 - g.failure_share) / (1 + g.save_overhead) : 0;
  g.wall_s = g.feasible ? with_saves_s / (1 - g.failure_share) : INFINITY;
  g.expected_failures = g.feasible && std::isfinite(g.mtbf_s) ? g.wall_s / g.mtbf_s : 0;
  g.failures_low = poisson_quantile(g.expected_failures, 0.05);
  g.failures_high = poisson_quantile(g.expected_failures, 0.95);
  g.days_ideal = ideal_s / 86400;
  g.days = g.wall_s / 86400;
  g.days_low = (with_saves_s + double(g.failures_low) * g.lost_per_failure_s) / 86400;
  g.days_high = (with_saves_s + double(g.failures_high) * g.lost_per_failure_s) / 86400;
  return g;
}

Goodput goodput(const RunSpec& run, const ResilienceInputs& in, double step_s, double ideal_s) {
  return goodput(checkpoint_size(run), in, run.layout.world_size(), nodes_of(run), step_s, ideal_s);
}


OptionDef rank_by_option() {
  return {"rank-by", "output",
          "order of the candidates: throughput (tokens/s) or goodput (tokens/s x goodput with failures, restarts "
          "and saves)",
          false, "throughput|goodput", "throughput"};
}

bool rank_by_goodput(const OptionValues& v, Problems& p) {
  const auto r = v.get_string("rank-by");
  if (!r || *r == "throughput") return false;
  if (*r == "goodput") return true;
  p.add("--rank-by '" + *r + "' (from " + v.source("rank-by") + ") is not a ranking", "use --rank-by throughput or --rank-by goodput",
        "rank-by");
  return false;
}

bool resilience_given(const OptionValues& v) {
  for (const auto& d : resilience_options())
    if (v.has(d.name)) return true;
  return false;
}

std::vector<RankedByGoodput> rank_by_goodput(const std::vector<Estimate>& candidates, const ResilienceInputs& in,
                                             size_t top) {
  std::vector<RankedByGoodput> out;
  for (const auto& e : candidates) {
    RankedByGoodput r{e, goodput(e.run, in, e.time.step, 0), 0};
    r.effective_tokens_per_s = e.tokens_per_s * r.goodput.goodput;
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const RankedByGoodput& a, const RankedByGoodput& b) {
    return a.effective_tokens_per_s > b.effective_tokens_per_s;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace trident::plan
