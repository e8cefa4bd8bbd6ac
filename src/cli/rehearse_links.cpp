// The links of a rehearsal, measured (see rehearse_links.h).
#include "cli/rehearse_links.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/cost_table.h"
#include "core/output_path.h"
#include "rehearse/rehearsal_link.h"
#include "runtime/measure/placement_probe.h"

namespace trident::cli {

namespace {

// A bench run (this machine, the link, the placement probe) takes under a minute here; one that
// has not ended in five is stopped and the rehearsal fails naming it (bounded waits everywhere).
constexpr double kBenchLimitS = 300;

void run_measurement(const std::vector<std::string>& launch, const std::string& what) {
  const int rc = measure::run_launcher(launch, kBenchLimitS);
  if (rc == measure::kLauncherTimedOut)
    throw std::runtime_error(fmt::format("`trident bench` measuring {} did not finish within {:.0f} s and was stopped",
                                         what, kBenchLimitS));
  if (rc != 0) throw std::runtime_error(fmt::format("`trident bench` measuring {} failed (exit {})", what, rc));
}

void run_bench(const LauncherLine& launcher, const std::vector<std::string>& placement, const std::string& out,
               const std::string& what, const rehearse::EpCalls& ep = {}, bool llama = false, bool link = false) {
  std::vector<std::string> args = {"bench", "--out", out, "--mpi-mib", fmt::format("{}", rehearse::kBenchMib)};
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

// Runs the placement probe on every rank of the rehearsal as placed; returns its inputs.
measure::PlacementInputs run_probe(const LauncherLine& launcher, const std::vector<std::string>& placement, int64_t ranks,
                          const RunSpec& run, const std::string& out, double intra_Bps, double inter_Bps) {
  const rehearse::ProbeSize size = rehearse::probe_size(run);
  const std::vector<std::string> args = {"bench", "--placement-probe", out, "--probe-bytes",
                                         fmt::format("{:.0f}", size.bytes), "--probe-flops",
                                         fmt::format("{:.6g}", size.flops)};
  std::printf("measuring the %lld ranks as the rehearsal places them: trident %s\n", (long long)ranks,
              [&] { std::string s; for (const auto& a : args) s += (s.empty() ? "" : " ") + a; return s; }().c_str());
  run_measurement(launcher(ranks, placement, args), "the ranks as placed (--placement-probe)");
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error("cannot read the placement probe's file " + out);
  measure::PlacementInputs inputs = measure::placement_inputs(measure::probe_from_json(j), intra_Bps, inter_Bps);
  inputs.text = fmt::format("  the probe's sizes: {:.0f} bytes = micro-batch {} x seq {} x hidden {} x 4 / tp {}; "
                            "{:.4g} FLOPs = 3 x the layer's forward {:.4g} / its {} exchanges (TP ring steps and EP all-to-alls) ({})\n",
                            size.bytes, run.exec.micro_batch_size, run.model.seq_len, run.model.hidden,
                            run.layout.tp, size.flops, size.flops * double(size.exchanges) / 3, size.exchanges, out) +
                inputs.text;
  return inputs;
}


}  // namespace

RehearsalLinks prepare_links(const RunSpec& plan, const RehearsalShape& shape, const std::string& bench_file,
                             const std::string& dir, double link_Bps, int64_t steps, int64_t runs,
                             const LauncherLine& launcher) {
  RehearsalLinks out;
  std::string machine = bench_file;
  if (machine.empty()) {
    machine = dir + "/machine.toml";
    run_bench(launcher, {}, machine, "this machine (2 ranks, shared memory)", rehearse::ep_calls(shape.run),
              shape.run.model.family == ModelFamily::Llama);
    Problems p;
    rehearse::check_bench_file(machine, "the bench file measured", p);
    p.throw_if_any();
  }
  out.cluster_file = dir + "/prediction-cluster.toml";
  const std::string machine_text = rehearse::read_text_file(machine);
  if (shape.hosts == 1) {
    write_text_atomically(out.cluster_file, machine_text);
    out.text = "links: one host, shared memory; prediction on " + machine + " as measured\n";
    out.json = {{"hosts", 1}, {"machine", machine}};
    return out;
  }
  const OptionValues mv = rehearse::bench_values(machine);
  const double shm_Bps = rehearse::bench_number(mv, "intra-gbytes-per-s", machine) * 1e9;
  const ClusterSpec& pc = plan.cluster;
  const rehearse::LinkRate lr = rehearse::link_rate(plan, shape, shm_Bps, link_Bps);
  const double ratio = lr.ratio, target = lr.target_Bps, rate = lr.rate_Bps;
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  {
    Problems p;
    rehearse::check_link_time(plan, shape, machine, link_Bps, steps, runs, cores, p);
    p.throw_if_any();
  }
  out.hosts = std::make_unique<measure::EmulatedHosts>(int(shape.hosts), int(shape.ranks_per_host), rate);
  std::printf("emulated hosts: %s\n", out.hosts->describe().c_str());
  const std::string link_file = dir + "/link.toml";
  run_bench(launcher, out.hosts->mpirun_options_one_per_host(), link_file, "the link between two emulated hosts", {},
            false, true);
  const OptionValues lv = rehearse::bench_values(link_file);
  const double link_meas = rehearse::bench_number(lv, "intra-gbytes-per-s", link_file) * 1e9;
  const double link_lat = rehearse::bench_number(lv, "intra-latency-us", link_file);
  Problems p;
  // The options' names (dashes) read the [cost] keys (underscores) of a bench file.
  const double link_eff = std::min(1.0, lv.get_double("network-efficiency", p).value_or(CostTable{}.network_efficiency));
  const double shm_eff = mv.get_double("pcie-efficiency", p).value_or(CostTable{}.pcie_efficiency);
  const int64_t world = shape.run.layout.world_size();
  const measure::PlacementInputs probe =
      run_probe(launcher, out.hosts->mpirun_options(), world, shape.run, dir + "/placement.json", shm_Bps * shm_eff,
                link_meas / double(shape.ranks_per_host) * link_eff);
  const double share = probe.compute_share;
  const double tflops = rehearse::bench_number(mv, "gpu-fp32-tflops", machine) * share;
  const std::string text = rehearse::override_toml(
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
      link_Bps > 0 ? " (--link-gbytes-per-s)" : target > rehearse::kLinkCapBps ? " (capped at 0.1: what the bridge carries)" : "",
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

}  // namespace trident::cli
