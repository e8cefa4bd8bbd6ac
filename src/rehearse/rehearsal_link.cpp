// The links of a rehearsal (see rehearsal_link.h).
#include "rehearse/rehearsal_link.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/cost_table.h"
#include "core/options.h"
#include "core/output_path.h"
#include "plan/context_parallel.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/mixture_of_experts.h"
#include "rehearse/rehearsal_prediction.h"

namespace trident::rehearse {

namespace {

// The link measurement's time on a link of `Bps` each way: cmd_bench's 20 ping-pong round trips
// (one message each way, one after the other) and 10 ring all-reduces over two ranks (one
// message each way) of kBenchMib; its all-to-alls, unused here, are made 1 KiB.
double link_bench_s(double Bps) { return (2 * 20 + 10) * kBenchMib * (1 << 20) / Bps; }

}  // namespace

OptionValues bench_values(const std::string& path) {
  std::vector<OptionDef> defs = cluster_options();
  for (const auto& d : cost_options()) defs.push_back(d);
  OptionValues v(defs);
  Problems p;
  v.load_toml_file(path, p);
  p.throw_if_any();
  return v;
}

double bench_number(const OptionValues& v, const char* key, const std::string& file) {
  Problems p;
  const auto x = v.get_double(key, p);
  if (!x) throw std::runtime_error(file + " has no " + key + " (write it with `trident bench`)");
  return *x;
}

EpCalls ep_calls(const RunSpec& run) {
  EpCalls c;
  if (run.layout.ep <= 1 || !run.model.is_moe()) return c;
  const plan::Estimate e = plan::estimate(run, 0.0);
  const plan::EpComm& ec = e.ep_alltoall;  // one layer's, as the step time adds them up
  c.send_bytes = ec.message_bytes;
  const plan::StageMemory m = e.peak_memory();
  const double cap = 256.0 * (1 << 20);
  const double layer =
      (m.weights_bytes + m.gradients_bytes) / double(std::max<int64_t>(m.layers, 1)) + m.per_layer_activation_bytes;
  c.working_set = std::min(layer, cap);
  c.first_working_set = std::min(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes, cap);
  const double moe_layers = std::ceil(plan::moe_layer_share(run.model) * double(m.layers));
  c.per_step = std::max<int64_t>(
      1, std::llround(moe_layers * double(e.micro_batches) * double(ec.forward_alltoalls + ec.backward_alltoalls)));
  return c;
}

// The probe's exchange and compute chunk, from the rehearsed run as the planner costs it: the TP
// message each rank sends per ring step (b s h x 4 bytes / tp), and the layer's forward and
// backward FLOPs (3 x forward) per micro-batch over the exchanges that split them: its TP ring
// steps (2 (tp - 1) per collective) and its EP all-to-alls (dispatch and combine, forward and
// backward, in the MoE layers' share). Ranks sharing cores wait for their peer about as long as
// the compute between two exchanges, so the chunk must be the run's.
ProbeSize probe_size(const RunSpec& run) {
  const int64_t tp = std::max<int64_t>(1, run.layout.tp);
  const CostTable cost = cost_table(run);
  const plan::LayerCompute lc =
      plan::layer_compute(run.model, run.exec, tp, run.cluster.gpu, cost, run.layout.cp, run.layout.ep, run.layout.etp);
  GroupLink any;  // only the collectives' count is used
  any.bandwidth_Bps = 1;
  const plan::TpComm tc = plan::tp_comm_per_layer(run.model, run.exec, tp, any, cost);
  ProbeSize s;
  s.bytes = double(run.exec.micro_batch_size) * double(run.model.seq_len) * double(run.model.hidden) * 4.0 / double(tp);
  double exchanges = double((tc.forward_collectives + tc.backward_collectives) * 2 * (tp - 1));
  if (run.layout.ep > 1 && run.model.is_moe()) {
    const plan::EpComm ec = plan::ep_comm_per_layer(run.model, run.exec, run.layout.ep, any, cost);
    exchanges += plan::moe_layer_share(run.model) * double(ec.forward_alltoalls + ec.backward_alltoalls);
  }
  s.exchanges = std::max<int64_t>(1, std::llround(exchanges));
  s.flops = 3 * lc.forward_flops() / double(s.exchanges);
  return s;
}

void check_bench_file(const std::string& path, const std::string& flag, Problems& problems) {
  std::vector<OptionDef> defs = cluster_options();
  for (const auto& d : cost_options()) defs.push_back(d);
  OptionValues v(defs);
  Problems read;
  v.load_toml_file(path, read);
  const std::string named = flag + " '" + path + "'";
  for (const Problem& x : read.list()) problems.add(named + ": " + x.what, x.fix, "rehearse-bench");
  if (!read.empty()) return;
  // What the links and the prediction take from it: the peaks bench measures and the shares of
  // them its kernels and MPI reach ([cost]'s keys read with dashes).
  std::string missing;
  for (const char* key : {"gpu-fp32-tflops", "gpu-hbm-gbytes-per-s", "intra-gbytes-per-s", "intra-latency-us",
                          "gemm-peak-efficiency", "hbm-efficiency", "pcie-efficiency", "kernel-launch-us"})
    if (!v.has(key)) missing += std::string(missing.empty() ? "" : ", ") + key;
  if (!missing.empty()) {
    problems.add(named + " holds no measurement of " + missing + " (each `trident bench` writes)",
                 "give the file `mpirun -np 2 trident bench --out FILE` wrote on this machine, or drop " + flag +
                     " (rehearse then measures this machine itself)",
                 "rehearse-bench");
    return;
  }
  Problems range;
  const ClusterSpec c = resolve_cluster(v, range);
  resolve_cost(v, c.gpu, range);
  for (const Problem& x : range.list()) problems.add(named + ": " + x.what, x.fix, "rehearse-bench");
}

LinkRate link_rate(const RunSpec& plan, const RehearsalShape& shape, double shm_Bps, double link_Bps) {
  LinkRate r;
  const ClusterSpec& pc = plan.cluster;
  r.ratio = pc.intra.bandwidth_Bps / pc.inter_bandwidth_per_gpu_Bps();
  r.target_Bps = shm_Bps * double(shape.ranks_per_host) / r.ratio;
  r.rate_Bps = link_Bps > 0 ? link_Bps : std::min(r.target_Bps, kLinkCapBps);
  return r;
}

void check_link_time(const RunSpec& plan, const RehearsalShape& shape, const std::string& machine, double link_Bps,
                     int64_t steps, int64_t runs, int64_t cores, Problems& problems) {
  if (shape.hosts < 2) return;
  const double rate_Bps =
      link_rate(plan, shape, bench_number(bench_values(machine), "intra-gbytes-per-s", machine) * 1e9, link_Bps).rate_Bps;
  // The rehearsal on the machine's file with its hosts as nodes joined by the shaped link.
  auto predicted_s = [&](double Bps) {
    RunSpec r = prediction_run(shape.run, machine, cores, "");
    r.cluster.nodes = shape.hosts;
    r.cluster.gpus_per_node = shape.ranks_per_host;
    r.cluster.inter.bandwidth_Bps = Bps;
    return link_bench_s(Bps) + double(steps * runs) * prediction_of(r).step_s;
  };
  const double total = predicted_s(rate_Bps);
  if (total <= kRehearsalLimitS) return;
  // The time is fixed work plus the traffic over the rate: F + B / rate. Solved for the rate
  // that takes the limit, from the time at this rate and at a thousand times it.
  const double fast = predicted_s(rate_Bps * 1e3);
  const double traffic = (total - fast) / (1 / rate_Bps - 1 / (rate_Bps * 1e3));
  const double fixed = std::max(0.0, total - traffic / rate_Bps);
  const std::string fix =
      fixed < kRehearsalLimitS
          ? fmt::format("give --link-gbytes-per-s {:.3g} or more (or fewer --steps)", traffic / (kRehearsalLimitS - fixed) / 1e9)
          : "rehearse fewer --steps or a smaller --scale";
  problems.add(fmt::format("a link of {:.3g} GB/s per host is too slow to finish: its measurement ({:.0f} MiB each way) "
                           "and {} run(s) of {} steps as the planner predicts them take {:.3g} s, more than the {:.0f} s "
                           "a rehearsal may take",
                           rate_Bps / 1e9, (2 * 20 + 10) * kBenchMib, runs, steps, total, kRehearsalLimitS),
               fix, "rehearse-link");
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string override_toml(const std::string& machine, const std::vector<std::pair<std::string, std::string>>& cluster,
                          const std::vector<std::pair<std::string, std::string>>& cost) {
  std::stringstream in(machine);
  std::string line, section, out;
  std::vector<std::string> done;
  auto flush = [&](const std::string& sec) {  // the keys of `sec` not seen in it
    for (const auto& [k, v] : sec == "cluster" ? cluster : sec == "cost" ? cost : std::vector<std::pair<std::string, std::string>>{})
      if (std::find(done.begin(), done.end(), sec + "." + k) == done.end()) out += k + " = " + v + "\n";
  };
  while (std::getline(in, line)) {
    if (line.rfind("[", 0) == 0) {
      flush(section);
      section = line.substr(1, line.find(']') - 1);
      out += line + "\n";
      continue;
    }
    const std::string key = line.substr(0, line.find(" ="));
    bool replaced = false;
    for (const auto& [k, v] : section == "cluster" ? cluster : section == "cost" ? cost : std::vector<std::pair<std::string, std::string>>{})
      if (key == k) out += k + " = " + v + "\n", done.push_back(section + "." + k), replaced = true;
    if (!replaced) out += line + "\n";
  }
  flush(section);
  return out;
}


}  // namespace trident::rehearse
