// The links of a rehearsal (see rehearsal_link.h).
#include "runtime/parallel/rehearsal_link.h"

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
#include "runtime/parallel/placement_probe.h"
#include "runtime/parallel/rehearsal_prediction.h"

namespace trident::parallel {

namespace {

constexpr double kLinkCapBps = 0.1e9;  // below the ~0.2 GB/s the bridge and TCP carried unshaped here
// A bench run (this machine, the link, the placement probe) takes under a minute here; one that
// has not ended in five is stopped and the rehearsal fails naming it (bounded waits everywhere).
constexpr double kBenchLimitS = 300;

void run_measurement(const std::vector<std::string>& launch, const std::string& what) {
  const int rc = run_launcher(launch, kBenchLimitS);
  if (rc == kLauncherTimedOut)
    throw std::runtime_error(fmt::format("`trident bench` measuring {} did not finish within {:.0f} s and was stopped",
                                         what, kBenchLimitS));
  if (rc != 0) throw std::runtime_error(fmt::format("`trident bench` measuring {} failed (exit {})", what, rc));
}

// A bench file's values, read by the loaders plan uses.
OptionValues bench_values(const std::string& path) {
  std::vector<OptionDef> defs = cluster_options();
  for (const auto& d : cost_options()) defs.push_back(d);
  OptionValues v(defs);
  Problems p;
  v.load_toml_file(path, p);
  p.throw_if_any();
  return v;
}

double number(const OptionValues& v, const char* key, const std::string& file) {
  Problems p;
  const auto x = v.get_double(key, p);
  if (!x) throw std::runtime_error(file + " has no " + key + " (write it with `trident bench`)");
  return *x;
}

// How the rehearsed step calls its EP all-to-alls, for the bench to time them so (0: no ep).
struct EpCalls {
  double send_bytes = 0, working_set = 0, first_working_set = 0;
  int64_t per_step = 0;
};

// The link measurement's messages (bench --mpi-mib) and the time they take on a link of
// `Bps` each way: cmd_bench's 20 ping-pong round trips (one message each way, one after the
// other) and 10 ring all-reduces over two ranks (one message each way); its all-to-alls, unused
// here, are made 1 KiB.
constexpr double kBenchMib = 2;
double link_bench_s(double Bps) { return (2 * 20 + 10) * kBenchMib * (1 << 20) / Bps; }

void run_bench(const LauncherLine& launcher, const std::vector<std::string>& placement, const std::string& out,
               const std::string& what, const EpCalls& ep = {}, bool llama = false, bool link = false) {
  std::vector<std::string> args = {"bench", "--out", out, "--mpi-mib", fmt::format("{}", kBenchMib)};
  if (llama) args.insert(args.end(), {"--family", "llama"});
  if (link) args.insert(args.end(), {"--alltoall-mib", "0.001"});
  if (ep.send_bytes > 0) {
    auto mib = [](double bytes) { return fmt::format("{:.6g}", bytes / (1 << 20)); };
    args.insert(args.end(), {"--alltoall-mib", mib(ep.send_bytes), "--alltoall-working-set-mib", mib(ep.working_set),
                             "--alltoall-first-working-set-mib", mib(ep.first_working_set), "--alltoall-step-calls",
                             std::to_string(ep.per_step)});
  }
  std::string line;
  for (const auto& a : args) line += " " + a;
  std::printf("measuring %s: trident%s\n", what.c_str(), line.c_str());
  run_measurement(launcher(2, placement, args), what);
}

// The rehearsal's EP all-to-alls as the planner sizes them (none without ep), for the bench to
// time as the step makes them:
// - the send buffer of one (small messages run faster cache-resident);
// - what the kernels between two calls touch: one layer's weights, gradients and activations on
//   the most loaded stage;
// - what comes before the step's first: the optimizer's pass over the stage's weights,
//   gradients and optimizer states;
// - the calls of a step: the data all-to-alls of a MoE layer (forward, backward, recomputed)
//   times the stage's MoE layers and its micro-batches.
// Working sets at most 256 MiB, past any CPU's last-level cache (beyond it the call is as cold,
// and the sweep only costs time and memory).
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

}  // namespace

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

namespace {

// Runs the placement probe on every rank of the rehearsal as placed; returns its inputs.
PlacementInputs run_probe(const LauncherLine& launcher, const std::vector<std::string>& placement, int64_t ranks,
                          const RunSpec& run, const std::string& out, double intra_Bps, double inter_Bps) {
  const ProbeSize size = probe_size(run);
  const std::vector<std::string> args = {"bench", "--placement-probe", out, "--probe-bytes",
                                         fmt::format("{:.0f}", size.bytes), "--probe-flops",
                                         fmt::format("{:.6g}", size.flops)};
  std::printf("measuring the %lld ranks as the rehearsal places them: trident %s\n", (long long)ranks,
              [&] { std::string s; for (const auto& a : args) s += (s.empty() ? "" : " ") + a; return s; }().c_str());
  run_measurement(launcher(ranks, placement, args), "the ranks as placed (--placement-probe)");
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error("cannot read the placement probe's file " + out);
  PlacementInputs inputs = placement_inputs(probe_from_json(j), intra_Bps, inter_Bps);
  inputs.text = fmt::format("  the probe's sizes: {:.0f} bytes = micro-batch {} x seq {} x hidden {} x 4 / tp {}; "
                            "{:.4g} FLOPs = 3 x the layer's forward {:.4g} / its {} exchanges (TP ring steps and EP all-to-alls) ({})\n",
                            size.bytes, run.exec.micro_batch_size, run.model.seq_len, run.model.hidden,
                            run.layout.tp, size.flops, size.flops * double(size.exchanges) / 3, size.exchanges, out) +
                inputs.text;
  return inputs;
}

}  // namespace

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
      link_rate(plan, shape, number(bench_values(machine), "intra-gbytes-per-s", machine) * 1e9, link_Bps).rate_Bps;
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

RehearsalLinks prepare_links(const RunSpec& plan, const RehearsalShape& shape, const std::string& bench_file,
                             const std::string& dir, double link_Bps, int64_t steps, int64_t runs,
                             const LauncherLine& launcher) {
  RehearsalLinks out;
  std::string machine = bench_file;
  if (machine.empty()) {
    machine = dir + "/machine.toml";
    run_bench(launcher, {}, machine, "this machine (2 ranks, shared memory)", ep_calls(shape.run),
              shape.run.model.family == ModelFamily::Llama);
    Problems p;
    check_bench_file(machine, "the bench file measured", p);
    p.throw_if_any();
  }
  out.cluster_file = dir + "/prediction-cluster.toml";
  const std::string machine_text = read_text_file(machine);
  if (shape.hosts == 1) {
    write_text_atomically(out.cluster_file, machine_text);
    out.text = "links: one host, shared memory; prediction on " + machine + " as measured\n";
    out.json = {{"hosts", 1}, {"machine", machine}};
    return out;
  }
  const OptionValues mv = bench_values(machine);
  const double shm_Bps = number(mv, "intra-gbytes-per-s", machine) * 1e9;
  const ClusterSpec& pc = plan.cluster;
  const LinkRate lr = link_rate(plan, shape, shm_Bps, link_Bps);
  const double ratio = lr.ratio, target = lr.target_Bps, rate = lr.rate_Bps;
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  {
    Problems p;
    check_link_time(plan, shape, machine, link_Bps, steps, runs, cores, p);
    p.throw_if_any();
  }
  out.hosts = std::make_unique<EmulatedHosts>(int(shape.hosts), int(shape.ranks_per_host), rate);
  std::printf("emulated hosts: %s\n", out.hosts->describe().c_str());
  const std::string link_file = dir + "/link.toml";
  run_bench(launcher, out.hosts->mpirun_options_one_per_host(), link_file, "the link between two emulated hosts", {},
            false, true);
  const OptionValues lv = bench_values(link_file);
  const double link_meas = number(lv, "intra-gbytes-per-s", link_file) * 1e9;
  const double link_lat = number(lv, "intra-latency-us", link_file);
  Problems p;
  // The options' names (dashes) read the [cost] keys (underscores) of a bench file.
  const double link_eff = std::min(1.0, lv.get_double("network-efficiency", p).value_or(CostTable{}.network_efficiency));
  const double shm_eff = mv.get_double("pcie-efficiency", p).value_or(CostTable{}.pcie_efficiency);
  const int64_t world = shape.run.layout.world_size();
  const PlacementInputs probe =
      run_probe(launcher, out.hosts->mpirun_options(), world, shape.run, dir + "/placement.json", shm_Bps * shm_eff,
                link_meas / double(shape.ranks_per_host) * link_eff);
  const double share = probe.compute_share;
  const double tflops = number(mv, "gpu-fp32-tflops", machine) * share;
  const std::string text = override_toml(
      machine_text,
      {{"nodes", std::to_string(shape.hosts)}, {"gpus-per-node", std::to_string(shape.ranks_per_host)},
       {"gpu-fp32-tflops", fmt::format("{:.6f}", tflops)}, {"gpu-bf16-tflops", fmt::format("{:.6f}", tflops)},
       {"inter-link", "\"ethernet\""}, {"inter-node-gbytes-per-s", fmt::format("{:.4f}", link_meas / 1e9)},
       {"intra-latency-us", fmt::format("{:.3f}", probe.intra_latency_s * 1e6)},
       {"inter-latency-us", fmt::format("{:.3f}", probe.inter_latency_s * 1e6)}},
      {{"network_efficiency", fmt::format("{:.4f}", link_eff)}});
  write_text_atomically(out.cluster_file,
                        fmt::format("# The prediction's cluster for `trident rehearse`: {} with {} emulated hosts of {} "
                                    "ranks as nodes,\n# the link between hosts as measured in {} (shaped to {:.4f} GB/s), "
                                    "each rank's compute rate x {:.3f} and both latencies as the {} ranks measured them "
                                    "placed as the rehearsal places them ({}/placement.json).\n",
                                    machine, shape.hosts, shape.ranks_per_host, link_file, rate / 1e9, share, world, dir) +
                            text);
  out.text = fmt::format(
      "links: the plan's {} has {:.1f} GB/s per GPU inside a node and {:.2f} GB/s per GPU between nodes ({:.1f}x);\n"
      "  here inside a host shared memory {:.3f} GB/s per rank ({}), so between hosts {:.4f} GB/s per host of {} ranks "
      "would keep it;\n  shaped to {:.4f} GB/s{} and measured {:.4f} GB/s, {:.1f} us one way ({}; latency as TCP over "
      "the bridge gives it: netem is missing, latency is not shaped)\n  = {:.1f}x per rank here; prediction on {}, "
      "with compute and latencies as {} ranks on {} cores measured them:\n",
      pc.name, pc.intra.bandwidth_Bps / 1e9, pc.inter_bandwidth_per_gpu_Bps() / 1e9, ratio, shm_Bps / 1e9, machine,
      target / 1e9, shape.ranks_per_host, rate / 1e9,
      link_Bps > 0 ? " (--link-gbytes-per-s)" : target > kLinkCapBps ? " (capped at 0.1: what the bridge carries)" : "",
      link_meas / 1e9, link_lat, link_file, shm_Bps / (link_meas / double(shape.ranks_per_host)), out.cluster_file,
      world, cores);
  out.text += probe.text;
  out.json = {{"hosts", shape.hosts}, {"ranks_per_host", shape.ranks_per_host}, {"machine", machine},
              {"plan_ratio", ratio}, {"shared_memory_Bps_per_rank", shm_Bps}, {"target_Bps_per_host", target},
              {"shaped_Bps", rate}, {"measured_Bps", link_meas}, {"measured_latency_us", link_lat},
              {"latency_shaped", false}, {"network_efficiency", link_eff}, {"compute_share", share},
              {"placement_probe", dir + "/placement.json"}, {"shared_memory_efficiency", shm_eff},
              {"intra_latency_us", probe.intra_latency_s * 1e6}, {"inter_latency_us", probe.inter_latency_s * 1e6},
              {"intra_wire_us", probe.intra_wire_s * 1e6}, {"inter_wire_us", probe.inter_wire_s * 1e6},
              {"prefix", out.hosts->prefix()}};
  return out;
}

}  // namespace trident::parallel
