// trident bench: measure this machine and write it as a cluster description ([cluster]: the
// peaks) and a cost table ([cost]: the shares of those peaks the trainer's kernels and MPI reach).
// The planner reads the file with --config FILE and --cost FILE (or the rehearsal report's
// --prediction-cluster FILE).
//
// One MPI rank runs on one CPU core, so a "GPU" of the description is one core, every rate is
// of one thread (per second of its CPU time), gpus-per-node is the number of cores. What is
// written is what was measured:
//   peaks: FMA chains in registers (FLOP/s), a memcpy (memory), an MPI ping-pong (link);
//   cost:  sgemm rates per size as the GEMM curve E (n / (n + H))^3 (fitted to the sizes, E and
//          H written), a 1x1x1 sgemm as the kernel-call cost, the trainer's add / GELU / layer
//          norm against the memcpy rate, an MPI all-reduce's bus bandwidth against the ping-pong.
// The machine's load during the core measurements (engine/machine_load.h) is written too; under
// load they are repeated (at most 3 tries, the quietest kept) and the file and a warning say so.
// Run it as `mpirun -np 2 trident bench` to measure MPI; alone it measures no link and the
// collective efficiencies keep the built-in values (the file says so). With --placement-probe
// FILE it measures instead the ranks as a rehearsal places them, all active at once
// (runtime/measure/placement_probe.h), into FILE (JSON).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/runtime_commands.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "launch/blas_core.h"
#include "launch/fma_peak.h"
#include "plan/cost_model.h"
#include "runtime/engine/machine_load.h"
#include "runtime/engine/machine_rates.h"
#include "runtime/comm/world.h"
#include "runtime/kernels/ops.h"
#include "runtime/measure/placement_probe.h"

namespace trident::cli {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

struct BenchArgs {
  std::string out = "trident-cluster.toml";
  double mpi_mib = 8;
  double alltoall_mib = 0;  // 0: mpi_mib
  double alltoall_working_set_mib = 8;  // passed through the cache before each timed all-to-all
  int64_t alltoall_step_calls = 1;       // all-to-alls of a step, timed in sequence
  double alltoall_first_working_set_mib = -1;  // before a step's first one (-1: the working set's)
  std::string family = "gpt";  // whose memory-bound kernels hbm_efficiency measures
  std::string placement_probe;  // the probe's JSON instead of the cluster file
  double probe_bytes = 8192, probe_flops = 2e6;
  int64_t probe_iterations = 200;
};

// The placement probe over every rank of the world; rank 0 writes it.
int run_placement_probe(const BenchArgs& a, comm::World& world) {
  const measure::PlacementProbe p =
      measure::measure_placement(world, a.probe_bytes, a.probe_flops, a.probe_iterations);
  int status = 0;
  if (world.rank() == 0) {
    try {
      write_text_atomically(a.placement_probe, measure::probe_json(p).dump(2) + "\n");
      std::printf("wrote %s (placement probe: %lld ranks on %lld hosts)\n", a.placement_probe.c_str(),
                  (long long)p.ranks, (long long)p.hosts);
    } catch (const InputError& e) {
      std::fprintf(stderr, "trident bench: %s\n", e.problems().front().what.c_str());
      status = 1;
    }
  }
  return status;
}

// Ping-pong between world ranks 0 and 1: half the best round trip of `bytes` over `reps`.
double ping_pong_s(comm::World& world, size_t bytes, int reps) {
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    world.barrier();
    auto t0 = clock_type::now();
    if (world.rank() == 0) {
      world.send(buf.data(), bytes, 1);
      world.recv(buf.data(), bytes, 1);
    } else if (world.rank() == 1) {
      world.recv(buf.data(), bytes, 0);
      world.send(buf.data(), bytes, 0);
    }
    best = std::min(best, since(t0) / 2);
  }
  world.broadcast(&best, sizeof best, 0);
  return best;
}

// Best time of an all-reduce (sum) of `bytes` of floats over every rank; the slowest rank counts.
double allreduce_s(comm::World& world, size_t bytes) {
  std::vector<float> send(std::max<size_t>(bytes / sizeof(float), 1), 1.0f), recv(send.size());
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    world.barrier();
    auto t0 = clock_type::now();
    world.all_reduce(send.data(), recv.data(), send.size(), comm::ReduceOp::Sum);
    double t = since(t0), slowest = 0;
    world.all_reduce(&t, &slowest, 1, comm::ReduceOp::Max);
    best = std::min(best, slowest);
  }
  return best;
}

// Working sets of a rehearsal's tensors (a few MiB: what a small model's activations are), so
// the memory figures are those its kernels see.
constexpr size_t kCopyBytes = size_t(8) << 20;

// How a step calls its EP all-to-alls: `per_step` calls of the measured size, each after
// `working_set` bytes through the cache (the kernels between two calls), the step's first after
// `first_working_set` (the optimizer's pass over the rank's weights, gradients and states, and
// the forward up to the first dispatch).
struct AlltoallCalls {
  size_t working_set = 0, first_working_set = 0;
  int64_t per_step = 1;
};

// Time of an all-to-all of a `bytes` send buffer over every rank (bytes / n to each) as a
// training step calls it: through the trainer's own communicator (comm::MpiCommunicator: MPI's
// non-blocking all-to-all-v completed by polling, not its blocking all-to-all, whose fixed cost is lower),
// between kernels, its send rows just written and the kernels' working set through the cache
// since the last call (50 KB over 2 ranks took 6.1 us hot here, 7.8 with 8 MiB between calls,
// out of L2, and 28 with 32 MiB, out of L3). The step's first call finds the cache as the
// optimizer left it: a 0.1 MiB dispatch took 31 us there against 15-20 us for the step's later
// ones. So the calls are timed in steps as `calls` describes, and the mean call of the median
// step counts (a step's time is a sum of typical calls, not of best ones): at least 401 calls
// (with 41, the median of 7 steps of 6 came out 15.9-23.8 us across launches of the same bench on a
// quiet machine; with 401, 17.8-18.5 us, for about 30 ms more); the slowest rank counts.
int64_t alltoall_steps(int64_t per_step) {
  per_step = std::max<int64_t>(per_step, 1);
  return std::max<int64_t>(5, (401 + per_step - 1) / per_step) | 1;  // odd: one median step
}

// The bytes the timed sweep writes: each call's send buffer and the working set before it.
double alltoall_sweep_bytes(double send_bytes, const AlltoallCalls& calls) {
  const double steps = double(alltoall_steps(calls.per_step)), per_step = double(std::max<int64_t>(calls.per_step, 1));
  return steps * (double(calls.first_working_set) + (per_step - 1) * double(calls.working_set) + per_step * send_bytes);
}

double alltoall_s(comm::World& world, comm::Communicator& world_comm, size_t bytes, const AlltoallCalls& calls) {
  const size_t ranks = size_t(world_comm.size());
  const size_t each = std::max<size_t>(bytes / ranks, 1);
  std::vector<char> send(each * ranks, 1), recv(send.size());
  const std::vector<size_t> counts(ranks, each);
  std::vector<char> working_set(std::max<size_t>(std::max(calls.working_set, calls.first_working_set), 64), 1);
  const int64_t per_step = std::max<int64_t>(calls.per_step, 1);
  const int64_t steps = alltoall_steps(per_step);
  std::vector<double> step_times;
  for (int64_t step = 0; step < steps; ++step) {
    double sum = 0;
    for (int64_t call = 0; call < per_step; ++call) {
      const size_t through = std::max<size_t>(call == 0 ? calls.first_working_set : calls.working_set, 64);
      for (size_t i = 0; i < send.size(); ++i) send[i] = char(step + call + int64_t(i));
      for (size_t i = 0; i < through; i += 64) working_set[i] = char(working_set[i] + 1);
      world.barrier();
      auto t0 = clock_type::now();
      world_comm.all_to_all_v(send.data(), counts.data(), recv.data(), counts.data(), comm::DType::U8);
      double t = since(t0), slowest = 0;
      world.all_reduce(&t, &slowest, 1, comm::ReduceOp::Max);
      sum += slowest;
    }
    step_times.push_back(sum);
  }
  const size_t mid = step_times.size() / 2;
  std::nth_element(step_times.begin(), step_times.begin() + long(mid), step_times.end());
  return step_times[mid] / double(per_step);
}

// The GEMM curve E (n/(n+H))^3 closest to the measured efficiencies: least squares on their
// logarithms (relative errors alike for small and large sizes), H on a fine log grid, E exact.
struct GemmCurve {
  double peak_efficiency = 0, half_dim = 0;
};
GemmCurve fit_gemm_curve(const std::vector<int64_t>& n, const std::vector<double>& efficiency) {
  GemmCurve best;
  double best_sse = 1e300;
  for (double H = 0.25; H <= 4096; H *= 1.01) {
    plan::CostConstants c;
    c.gemm_half_dim = H;
    double mean = 0;
    for (size_t i = 0; i < n.size(); ++i)
      mean += std::log(efficiency[i] / plan::gemm_efficiency(double(n[i]), double(n[i]), double(n[i]), 1.0, c));
    mean /= double(n.size());
    double sse = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      const double r = std::log(efficiency[i]) -
                       (mean + std::log(plan::gemm_efficiency(double(n[i]), double(n[i]), double(n[i]), 1.0, c)));
      sse += r * r;
    }
    if (sse < best_sse) best_sse = sse, best = {std::exp(mean), H};
  }
  return best;
}

constexpr size_t kElementwiseFloats = size_t(1) << 20;

// What rank 0 measured on its core.
struct CoreRates {
  double peak_flops = 0, call_s = 0, copy_Bps = 0, hbm_efficiency = 0;
  launch::FmaPeak fma;  // the FMA chains' rate and loop (peak_flops: the higher of it and sgemm's best)
  std::vector<engine::GemmRate> gemms;
  std::vector<double> gemm_efficiency;  // per size, launch cost taken out, of the FMA peak
  GemmCurve curve;
  std::vector<engine::ElementwiseRate> elementwise;
  double optimizer_s = 0;  // the optimizer pass over kElementwiseFloats parameters
};

CoreRates measure_core(bool llama) {
  CoreRates r;
  auto k1 = kernels::make_cpu_kernels(1);
  r.fma = launch::fma_peak();
  r.call_s = engine::kernel_call_s(*k1);
  // Calls of at most a few milliseconds: a best time survives a loaded machine's preemptions.
  const std::vector<int64_t> sizes = {16, 32, 64, 128, 192, 256};
  r.gemms = engine::gemm_rates(*k1, sizes, 0.1);
  r.copy_Bps = engine::copy_bandwidth_Bps(kCopyBytes);
  r.elementwise = engine::elementwise_rates(*k1, kElementwiseFloats, llama);
  r.optimizer_s = engine::optimizer_seconds(*k1, kElementwiseFloats);
  // The peak again after the rest, the better of the two: a busy spell of the machine (or of the
  // host under a virtual machine, which even CPU time does not see) must not lower it.
  if (const launch::FmaPeak again = launch::fma_peak(); again.flops_per_s > r.fma.flops_per_s) r.fma = again;
  r.peak_flops = r.fma.flops_per_s;
  // Each size's rate without the call cost (never more than half the time taken out: a loaded
  // machine can lengthen the 1x1x1 call's best time). A physical peak is not below what a kernel
  // reached: where sgemm outruns the FMA chains (a CPU whose widest FMAs the chains do not keep
  // busy), its best rate is the peak, so no share is above 1.
  std::vector<double> rates;
  for (const auto& g : r.gemms)
    rates.push_back(2.0 * double(g.n) * double(g.n) * double(g.n) / std::max(g.seconds - r.call_s, g.seconds / 2));
  for (double rate : rates) r.peak_flops = std::max(r.peak_flops, rate);
  for (double rate : rates) r.gemm_efficiency.push_back(rate / r.peak_flops);
  r.curve = fit_gemm_curve(sizes, r.gemm_efficiency);
  double bytes = 0, secs = 0;
  for (const auto& e : r.elementwise) bytes += e.bytes_moved, secs += e.seconds;
  r.hbm_efficiency = bytes / secs / r.copy_Bps;
  return r;
}

// The core measurements and the machine's load while they ran. Under load they are taken again,
// at most twice, and the quietest try is kept (the fewest cores other processes kept busy).
struct QuietCore {
  CoreRates rates;
  MachineLoad load;
  int tries = 0;
};

QuietCore measure_core_quietly(bool llama) {
  QuietCore best;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const engine::LoadProbe probe(1);
    CoreRates r = measure_core(llama);
    const MachineLoad load = probe.stop();
    if (attempt == 1 || load.other_cores_busy() < best.load.other_cores_busy()) best.rates = r, best.load = load;
    best.tries = attempt;
    if (!load.under_load()) break;
  }
  if (!best.load.under_load()) return best;
  std::fprintf(stderr,
               "trident bench: warning: measured under load (%d tries): this thread %s. The rates may be low "
               "(shared caches and memory bandwidth, a virtual machine's host); the file says so. Run it again "
               "on a quiet machine for the machine's own figures.\n",
               best.tries, best.load.describe().c_str());
  return best;
}

// How the file records the load: comments written as keys (the [cluster] and [cost] readers
// know no such keys), measured_under_load and cpu_share first.
std::string load_lines(const QuietCore& q) {
  const MachineLoad& l = q.load;
  if (!l.known) return "# measured_under_load = unknown (no /proc/stat to read the machine's load from)\n";
  return fmt::format(
      "# measured_under_load = {}\n# cpu_share = {:.2f}\n# other_cores_busy = {:.2f}\n"
      "#   the core measurements' load ({} of 3 tries): this thread {}\n"
      "#   (under load: below 0.90 of its core, or other processes keeping over half of the other cores busy)\n",
      l.under_load() ? "true" : "false", l.cpu_share(), l.other_cores_busy(), q.tries, l.describe());
}

// The link between ranks 0 and 1 and the all-reduce over all ranks (every rank takes part).
struct LinkRates {
  bool measured = false;
  double latency_s = 1e-6, bandwidth_Bps = 0, allreduce_s = 0, bus_Bps = 0, collective_efficiency = 0;
  double alltoall_s = 0, alltoall_Bps = 0;
  // A row-count exchange's all-to-all (kCountBytes to each rank) over (n-1): the fixed cost of
  // one all-to-all call per peer, which a ping-pong's latency leaves out (alltoall_latency_us).
  double alltoall_count_s = 0, alltoall_latency_s = 0;
};

// What a MoE layer's row-count exchange sends each rank: 8 experts' int32 counts.
constexpr size_t kCountBytes = 8 * sizeof(int32_t);

LinkRates measure_links(comm::World& ranks, size_t bytes, size_t alltoall_bytes, const AlltoallCalls& calls) {
  const int rank = ranks.rank(), world = ranks.size();
  LinkRates l;
  if (world < 2) {
    l.bandwidth_Bps = engine::copy_bandwidth_Bps(bytes) / 2;  // one direction of one copy
    return l;
  }
  l.measured = true;
  l.latency_s = ping_pong_s(ranks, 8, 200);
  // A loaded machine can delay even the best small round trip: never subtract more than half.
  const double t = ping_pong_s(ranks, bytes, 20);
  l.bandwidth_Bps = double(bytes) / std::max(t - l.latency_s, t / 2);
  l.allreduce_s = allreduce_s(ranks, bytes);
  // Ring all-reduce: 2(n-1) latencies + 2(n-1)/n S at the bus bandwidth (the planner's model).
  const double n = double(world);
  const double wire = std::max(l.allreduce_s - 2 * (n - 1) * l.latency_s, l.allreduce_s / 2);
  l.bus_Bps = 2 * (n - 1) / n * double(bytes) / wire;
  l.collective_efficiency = l.bus_Bps / l.bandwidth_Bps;
  // All-to-all: (n-1) of its per-peer latencies + (n-1)/n S at its rate (the planner's
  // alltoall_time_s), timed through the trainer's communicator; the latency from a call that
  // moves almost nothing (a row-count exchange), the rate from the rest of the full call.
  auto context = std::make_shared<comm::CommContext>();
  context->world_rank = rank;
  std::vector<int> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) all[size_t(r)] = r;
  const auto world_comm = ranks.communicator("world", all, context);
  // The row-count exchange's fixed cost: one call at a time, after a layer's working set.
  l.alltoall_count_s = alltoall_s(ranks, *world_comm, kCountBytes * size_t(world), {calls.working_set, calls.working_set, 1});
  l.alltoall_latency_s = std::max(l.alltoall_count_s / (n - 1), l.latency_s);
  l.alltoall_s = alltoall_s(ranks, *world_comm, alltoall_bytes, calls);
  const double a2a_wire = std::max(l.alltoall_s - (n - 1) * l.alltoall_latency_s, l.alltoall_s / 2);
  l.alltoall_Bps = (n - 1) / n * double(alltoall_bytes) / a2a_wire;
  return l;
}

// A measured share above 1 (the kernels beat the probe that set the peak: a cache, a busy moment
// during the probe) is written as 1 of a peak raised to the kernels' rate: the product the planner
// uses is still the measured rate, and the cost table's range (a share is at most 1) holds.
struct PeakShare {
  double peak, share;
  bool raised;
};
PeakShare within_one(double peak, double share) {
  return share > 1 ? PeakShare{peak * share, 1.0, true} : PeakShare{peak, share, false};
}

std::string bench_toml(const QuietCore& q, const LinkRates& l, int world, int cores, double ram, double mib,
                       double alltoall_mib, const AlltoallCalls& calls) {
  const CoreRates& r = q.rates;
  const PeakShare flops = within_one(r.peak_flops, r.curve.peak_efficiency);
  const PeakShare hbm = within_one(r.copy_Bps, r.hbm_efficiency);
  const PeakShare link = within_one(l.bandwidth_Bps, l.measured ? l.collective_efficiency : 0.0);
  // Every share printed below is of the peak written to [cluster] (raised or not), so the file
  // checks by hand: rate / peak = share, and the curve is drawn with the written E and H.
  plan::CostConstants curve;
  curve.gemm_peak_efficiency = flops.share;
  curve.gemm_half_dim = r.curve.half_dim;
  const std::string flops_raised =
      flops.raised ? fmt::format(", raised to {:.2f} GFLOP/s (the fitted curve's E came out {:.3f} of the peak)",
                                 flops.peak / 1e9, r.curve.peak_efficiency)
                   : "";
  const std::string hbm_raised =
      hbm.raised ? fmt::format(", raised to {:.2f} GB/s (the kernels came out {:.3f} of the memcpy)", hbm.peak / 1e9,
                               r.hbm_efficiency)
                 : "";
  std::string s =
      "# This machine as a Trident cluster and cost table, measured by `trident bench`.\n"
      "# One MPI rank = one CPU core = one \"GPU\" below; every core rate is of one thread, per second of its\n"
      "# CPU time (best of several calls), so other processes on the machine lower it less.\n";
  s += load_lines(q);
  s += "# The sgemm rates below are OpenBLAS's kernels for core " + launch::blas_core_note(kernels::blas_core_name()) +
       ".\n";
  s += fmt::format("# Peaks ([cluster]): FMA chains in registers {}{}{}; a {} MiB memcpy {:.2f} GB/s{} (read + write).\n",
                   r.fma.describe(),
                   r.peak_flops > r.fma.flops_per_s ? fmt::format(", sgemm's best {:.2f} GFLOP/s (without the call cost; the peak: the higher)",
                                                            r.peak_flops / 1e9)
                                              : "",
                   flops_raised, kCopyBytes >> 20, r.copy_Bps / 1e9, hbm_raised);
  if (l.measured)
    s += fmt::format("#   link: MPI ping-pong between ranks 0 and 1 ({} ranks): {:.2f} us for 8 bytes, {:.3f} GB/s for "
                     "{:g} MiB.\n",
                     world, l.latency_s * 1e6, l.bandwidth_Bps / 1e9, mib);
  else
    s += fmt::format("#   link: memcpy only (one rank), {:.3f} GB/s one way, 1 us latency assumed; run `mpirun -np 2 "
                     "trident bench` to measure MPI itself.\n",
                     l.bandwidth_Bps / 1e9);
  s += "# Achieved over those peaks ([cost]):\n";
  for (size_t i = 0; i < r.gemms.size(); ++i) {
    const double n = double(r.gemms[i].n);
    s += fmt::format("#   sgemm {:>4}^3: {:10.1f} us, {:7.2f} GFLOP/s = {:.3f} of the peak (the curve: {:.3f})\n",
                     r.gemms[i].n, r.gemms[i].seconds * 1e6, r.gemms[i].flops_per_s / 1e9,
                     r.gemm_efficiency[i] * r.peak_flops / flops.peak,
                     plan::gemm_efficiency(n, n, n, curve));
  }
  s += "#   gemm_peak_efficiency, gemm_half_dim: the planner's curve E (n / (n + H))^3 fitted to these sizes\n"
       "#     (least squares on log efficiency; the call cost below taken out of each time, at most half of it)\n";
  s += fmt::format("#   kernel_launch_us: one 1x1x1 sgemm call, {:.3f} us\n", r.call_s * 1e6);
  std::string list;
  for (const auto& e : r.elementwise)
    list += fmt::format("{}{} {:.2f} GB/s", list.empty() ? "" : ", ", e.kernel, e.bytes_moved / e.seconds / 1e9);
  s += fmt::format("#   hbm_efficiency: the trainer's memory-bound kernels over {} Mi floats ({}): together {:.3f} of "
                   "the memcpy rate\n",
                   kElementwiseFloats >> 20, list, hbm.share);
  // The planner's optimizer time is params x bytes per param / (memory peak x hbm_efficiency):
  // the bytes per parameter that give the measured pass at the written peak and share.
  const double optimizer_bpp = r.optimizer_s / double(kElementwiseFloats) * hbm.peak * hbm.share;
  s += fmt::format("#   optimizer_bytes_per_param: the trainer's optimizer pass (gradient sum of squares + AdamW) over {} "
                   "Mi floats, {:.1f} us = {:.2f} ns per parameter; x {:.2f} GB/s x {:.4f} = {:.1f} B per parameter "
                   "(the update's 28 B at the memory rate would be {:.2f} ns)\n",
                   kElementwiseFloats >> 20, r.optimizer_s * 1e6, r.optimizer_s / double(kElementwiseFloats) * 1e9,
                   hbm.peak / 1e9, hbm.share, optimizer_bpp, 28 / (hbm.peak * hbm.share) * 1e9);
  if (l.measured)
    s += fmt::format("#   pcie_efficiency, network_efficiency: an all-reduce of {:g} MiB over the {} ranks, {:.1f} us: "
                     "bus bandwidth {:.3f} GB/s = {:.3f} of the ping-pong's\n"
                     "#     (the planner applies the same share to point-to-point sends)\n",
                     mib, world, l.allreduce_s * 1e6, l.bus_Bps / 1e9, l.collective_efficiency);
  if (l.measured)
    s += fmt::format("#   alltoall_latency_us: an all-to-all of {} B to each of the {} ranks (a MoE layer's row-count "
                     "exchange), {:.1f} us (median, called as below) over {} peer(s) (at least the ping-pong's latency)\n"
                     "#   alltoall_efficiency: an all-to-all of {:g} MiB over the {} ranks, {:.1f} us (the mean call of "
                     "the median of steps of {} call(s) between kernels through the trainer's communicator: {:g} MiB "
                     "through the cache before each, {:g} MiB before a step's first): {:.3f} GB/s "
                     "((n-1)/n of it over the time less (n-1) x alltoall_latency_us) = {:.3f} of the ping-pong's{}\n",
                     kCountBytes, world, l.alltoall_count_s * 1e6, world - 1, alltoall_mib, world, l.alltoall_s * 1e6,
                     calls.per_step, double(calls.working_set) / (1 << 20), double(calls.first_working_set) / (1 << 20),
                     l.alltoall_Bps / 1e9, l.alltoall_Bps / link.peak, link.raised ? " (raised peak)" : "");
  else
    s += "#   pcie_efficiency, network_efficiency: not measured (one rank): the built-in values apply\n";
  for (const auto& [raised, what] : {std::pair{flops.raised, "the GEMM curve's peak share and the FMA peak"},
                                     std::pair{hbm.raised, "hbm_efficiency and the memcpy rate"},
                                     std::pair{link.raised, "the all-reduce share and the ping-pong bandwidth"}})
    if (raised)
      s += fmt::format("#   {} came out above 1: written as 1 of a peak raised to the measured rate (same product)\n",
                       what);
  s += fmt::format(
      "[cluster]\nnodes = 1\ngpus-per-node = {}\ngpu-memory-gib = {:.3f}\ngpu-fp32-tflops = {:.6f}\n"
      "gpu-bf16-tflops = {:.6f}\ngpu-hbm-gbytes-per-s = {:.3f}\nintra-link = \"pcie\"\nintra-gbytes-per-s = {:.4f}\n"
      "intra-latency-us = {:.3f}\ninter-link = \"ethernet\"\ninter-node-gbytes-per-s = {:.4f}\n"
      "inter-latency-us = {:.3f}\n",
      cores, ram / double(1 << 30) / cores, flops.peak / 1e12, flops.peak / 1e12, hbm.peak / 1e9, link.peak / 1e9,
      l.latency_s * 1e6, link.peak / 1e9 * cores, l.latency_s * 1e6);
  s += fmt::format("\n[cost]\ngemm_peak_efficiency = {:.4f}\ngemm_half_dim = {:.2f}\nkernel_launch_us = {:.4f}\n"
                   "hbm_efficiency = {:.4f}\noptimizer_bytes_per_param = {:.3f}\n",
                   flops.share, r.curve.half_dim, r.call_s * 1e6, hbm.share, optimizer_bpp);
  if (l.measured)
    s += fmt::format("pcie_efficiency = {:.4f}\nnetwork_efficiency = {:.4f}\nalltoall_efficiency = {:.4f}\n"
                     "alltoall_latency_us = {:.3f}\n",
                     link.share, link.share, std::min(4.0, l.alltoall_Bps / link.peak),  // 4: the cost table's range
                     l.alltoall_latency_s * 1e6);
  return s;
}

// The measurements of one world (MPI's, a singleton without mpirun).
int bench_world(const BenchArgs& a, comm::World& ranks) {
  const int rank = ranks.rank(), world = ranks.size();
  if (!a.placement_probe.empty()) return run_placement_probe(a, ranks);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double ram = double(pages) * double(page);
  const QuietCore core = rank == 0 ? measure_core_quietly(a.family == "llama") : QuietCore{};
  ranks.sleeping_barrier();  // the others wait for rank 0's core measurements without taking a core
  const double alltoall_mib = a.alltoall_mib > 0 ? a.alltoall_mib : a.mpi_mib;
  AlltoallCalls calls;
  calls.working_set = size_t(a.alltoall_working_set_mib * (1 << 20));
  calls.first_working_set =
      a.alltoall_first_working_set_mib < 0 ? calls.working_set : size_t(a.alltoall_first_working_set_mib * (1 << 20));
  calls.per_step = a.alltoall_step_calls;
  const LinkRates links = measure_links(ranks, size_t(a.mpi_mib * (1 << 20)), size_t(alltoall_mib * (1 << 20)), calls);
  int status = 0;
  if (rank == 0) {
    const std::string text = bench_toml(core, links, world, cores, ram, a.mpi_mib, alltoall_mib, calls);
    std::printf("%s", text.c_str());
    try {
      write_text_atomically(a.out, text);
      std::printf("wrote %s (use it with --config %s --cost %s, or --prediction-cluster for the rehearsal report)\n",
                  a.out.c_str(), a.out.c_str(), a.out.c_str());
    } catch (const InputError& e) {
      std::fprintf(stderr, "trident bench: %s\n", e.problems().front().what.c_str());
      status = 1;
    }
  }
  return status;
}

int run_bench(const BenchArgs& a) {
  std::unique_ptr<comm::World> world = comm::open_mpi_world();
  const int status = bench_world(a, *world);
  comm::close_world(std::move(world));
  return status;
}

// The all-to-all sweep writes its working sets and send buffers at memory speed: more than
// kSweepBytesLimit (a few seconds at the 10-20 GB/s of one core here; 4096 calls after 1 GiB each
// wrote 20 TiB and ran for hours) is refused before anything runs.
constexpr double kSweepBytesLimit = 32.0 * (1 << 30);

void check_sweep(const BenchArgs& a, Problems& p) {
  AlltoallCalls calls;
  calls.working_set = size_t(a.alltoall_working_set_mib * (1 << 20));
  calls.first_working_set =
      a.alltoall_first_working_set_mib < 0 ? calls.working_set : size_t(a.alltoall_first_working_set_mib * (1 << 20));
  calls.per_step = a.alltoall_step_calls;
  const double send = (a.alltoall_mib > 0 ? a.alltoall_mib : a.mpi_mib) * (1 << 20);
  const double bytes = alltoall_sweep_bytes(send, calls);
  if (bytes > kSweepBytesLimit)
    p.add(fmt::format("--alltoall-step-calls {} with --alltoall-working-set-mib {} (and --alltoall-mib {}) writes "
                      "{:.1f} GiB in the all-to-all sweep ({} steps of {} calls, each after its working set), more "
                      "than the {:.0f} GiB it may take",
                      a.alltoall_step_calls, a.alltoall_working_set_mib, send / (1 << 20), bytes / (1 << 30),
                      alltoall_steps(calls.per_step), calls.per_step, kSweepBytesLimit / (1 << 30)),
          "give fewer --alltoall-step-calls or a smaller --alltoall-working-set-mib", "option-range");
}

Runner setup_bench(CLI::App& cmd) {
  auto args = std::make_shared<BenchArgs>();
  cmd.add_option("--out", args->out, "cluster and cost TOML to write (default trident-cluster.toml)");
  cmd.add_option("--mpi-mib", args->mpi_mib, "message size for the MPI bandwidth, MiB (default 8)");
  cmd.add_option("--family", args->family,
                 "whose memory-bound kernels hbm_efficiency measures: gpt (add, GELU, layer norm) or llama (add, "
                 "SwiGLU, RMS norm) (default gpt; `trident rehearse` gives its model's)");
  cmd.add_option("--alltoall-mib", args->alltoall_mib,
                 "send buffer of the all-to-all measured for alltoall_efficiency, MiB (default: --mpi-mib's; "
                 "`trident rehearse` gives its EP messages')");
  cmd.add_option("--alltoall-working-set-mib", args->alltoall_working_set_mib,
                 "bytes passed through the cache before each timed all-to-all, as a step's kernels between two "
                 "do, MiB (default 8; `trident rehearse` gives one layer's weights, gradients and activations)");
  cmd.add_option("--alltoall-step-calls", args->alltoall_step_calls,
                 "the all-to-alls of one step, timed in sequence as the step makes them (default 1; `trident "
                 "rehearse` gives its run's data all-to-alls per step)");
  cmd.add_option("--alltoall-first-working-set-mib", args->alltoall_first_working_set_mib,
                 "bytes through the cache before a step's first all-to-all, MiB (default: --alltoall-working-set-mib's; "
                 "`trident rehearse` gives the optimizer's pass over the rank's weights, gradients and states)");
  cmd.add_option("--placement-probe", args->placement_probe,
                 "measure instead every rank as placed, all at once (compute share, exchange times), into this JSON");
  cmd.add_option("--probe-bytes", args->probe_bytes, "the probe's exchange, bytes each way (default 8192)");
  cmd.add_option("--probe-flops", args->probe_flops, "the probe's compute chunk, FLOPs (default 2e6)");
  cmd.add_option("--probe-iterations", args->probe_iterations, "the probe's timed chunk + exchange pairs (default 200)");
  return [args] {
    Problems p;
    if (!(args->probe_bytes >= 1 && args->probe_bytes <= double(1 << 30)))
      p.add(fmt::format("--probe-bytes {} is outside 1 .. 2^30", args->probe_bytes), "give e.g. --probe-bytes 8192",
            "option-range");
    if (!(args->probe_flops >= 1e3 && args->probe_flops <= 1e12))
      p.add(fmt::format("--probe-flops {} is outside 1e3 .. 1e12", args->probe_flops), "give e.g. --probe-flops 2e6",
            "option-range");
    if (args->probe_iterations < 1 || args->probe_iterations > 100000)
      p.add(fmt::format("--probe-iterations {} is outside 1 .. 100000", args->probe_iterations),
            "give e.g. --probe-iterations 200", "option-range");
    if (!args->placement_probe.empty()) check_outputs({{args->placement_probe, "--placement-probe"}}, {}, p);
    if (!(args->mpi_mib >= 0.001 && args->mpi_mib <= 1024))  // also refuses NaN
      p.add("--mpi-mib " + std::to_string(args->mpi_mib) + " is outside 0.001 .. 1024", "give e.g. --mpi-mib 8",
            "option-range");
    if (args->family != "gpt" && args->family != "llama")
      p.add("--family '" + args->family + "' is not gpt or llama", "give --family gpt or --family llama", "option-range");
    if (!(args->alltoall_mib == 0 || (args->alltoall_mib >= 0.001 && args->alltoall_mib <= 1024)))
      p.add("--alltoall-mib " + std::to_string(args->alltoall_mib) + " is outside 0.001 .. 1024",
            "give e.g. --alltoall-mib 0.125, or leave it out for --mpi-mib's size", "option-range");
    if (!(args->alltoall_working_set_mib >= 0 && args->alltoall_working_set_mib <= 1024))
      p.add(fmt::format("--alltoall-working-set-mib {} is outside 0 .. 1024", args->alltoall_working_set_mib),
            "give e.g. --alltoall-working-set-mib 8", "option-range");
    if (args->alltoall_step_calls < 1 || args->alltoall_step_calls > 4096)
      p.add(fmt::format("--alltoall-step-calls {} is outside 1 .. 4096", args->alltoall_step_calls),
            "give e.g. --alltoall-step-calls 6", "option-range");
    if (!(args->alltoall_first_working_set_mib == -1 ||
          (args->alltoall_first_working_set_mib >= 0 && args->alltoall_first_working_set_mib <= 1024)))
      p.add(fmt::format("--alltoall-first-working-set-mib {} is outside 0 .. 1024", args->alltoall_first_working_set_mib),
            "give e.g. --alltoall-first-working-set-mib 32, or leave it out for --alltoall-working-set-mib's",
            "option-range");
    if (p.empty()) check_sweep(*args, p);
    check_outputs({{args->out, "--out"}}, {}, p);
    p.throw_if_any();
    return run_bench(*args);
  };
}

TRIDENT_COMMAND("bench", runtime_command_help("bench"), setup_bench);

}  // namespace
}  // namespace trident::cli
