// The planner's prediction of a rehearsal (see rehearsal_prediction.h).
#include "rehearse/rehearsal_prediction.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/options.h"
#include "plan/estimate.h"

namespace trident::rehearse {

namespace {

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

}  // namespace

RunSpec prediction_run(const RunSpec& run, const std::string& cluster_toml, int64_t hardware_cores,
                       const std::string& cost_toml, std::string* note) {
  Problems problems;
  // The file `trident bench` writes: a [cluster] table (peaks) and a [cost] table (the measured
  // shares of them), read by the same loaders plan and simulate use.
  std::vector<OptionDef> defs = cluster_options();
  for (const auto& d : cost_options()) defs.push_back(d);
  OptionValues values(defs);
  if (!cost_toml.empty()) values.set("cost", cost_toml, "--cost");
  values.load_toml_file(cluster_toml, problems);
  problems.throw_if_any();
  RunSpec r = run;
  r.cluster = resolve_cluster(values, problems);
  r.cost = resolve_cost(values, r.cluster.gpu, problems);
  problems.throw_if_any();
  if (r.cost->source.find("[cost] keys") != std::string::npos) r.cost->source += " of " + cluster_toml;
  r.cluster.name = "this machine";
  r.cluster.gpu.name = "CPU core";
  std::string n;
  const int64_t world = run.layout.world_size();
  r.exec.precision = Precision::FP32;
  r.exec.grad_bits = 32;
  // The runtime posts each pipeline send and computes on (it waits for them at the step's end):
  // predicted as overlapped sends, whatever schedule.
  if (run.layout.pp > 1 && !pp_overlapped(r.exec.overlap, r.exec.schedule)) {
    r.exec.overlap.pp = true;
    r.exec.overlap.pp_interleaved_only = false;
    n = "pipeline sends asynchronous, as the runtime sends them; ";
  }
  // It sends the activation each TP rank holds: without sequence parallel the whole tensor, not
  // 1/tp shares the receiver gathers.
  if (pipeline_sends_scattered(r.exec, run.layout.tp, run.layout.pp)) {
    r.exec.recipe.pipeline_sends_whole_tensor = true;
    n += "pipeline sends of the whole tensor from every TP rank, as the runtime sends them; ";
  }
  if (world > r.cluster.gpus_per_node * r.cluster.nodes || r.cluster.nodes == 1) {
    const double share = std::min(1.0, double(hardware_cores) / double(world));
    if (share < 1.0) {
      r.cluster.gpu.fp32_flops *= share;
      r.cluster.gpu.bf16_flops *= share;
      n += std::to_string(world) + " ranks share " + std::to_string(hardware_cores) +
          " cores: each rank's compute rate taken as the measured one x " + fmt("%.3f", share) + "; ";
    }
    r.cluster.gpus_per_node = std::max<int64_t>(world, 1);
    r.cluster.nodes = 1;
    n += "all ranks on one node; fp32 throughout";
  }
  if (n.size() >= 2 && n.compare(n.size() - 2, 2, "; ") == 0) n.resize(n.size() - 2);
  if (note) *note = n;
  return r;
}

Prediction prediction_of(const RunSpec& r) {
  Prediction p;
  p.cluster = r.cluster.describe();
  p.cost_source = r.cost->source;
  p.cost = describe(*r.cost);
  if (!r.cost->calibrated) p.cost += "; warning: " + calibration_warning(*r.cost);
  for (const auto& f : cost_fields()) p.cost_values.emplace_back(f.name, (*r.cost).*(f.member));
  plan::Estimate e = plan::estimate(r, 0.0);
  p.step_s = e.time.step;
  p.time = e.time;
  p.ep_load_imbalance = r.model.moe_load_imbalance;
  p.peak_memory_bytes = e.peak_memory().total_bytes();
  return p;
}

Prediction predict(const RunSpec& run, const std::string& cluster_toml, int64_t hardware_cores,
                   const std::string& cost_toml) {
  std::string note;
  const RunSpec r = prediction_run(run, cluster_toml, hardware_cores, cost_toml, &note);
  Prediction p = prediction_of(r);
  p.cluster_source = cluster_toml;
  p.note = note;
  return p;
}

}  // namespace trident::rehearse
