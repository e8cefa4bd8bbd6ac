// The rehearsal's placement probe (see placement_probe.h).
#include "runtime/measure/placement_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <set>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "runtime/kernels/ops.h"

namespace trident::measure {

namespace {

double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Chunk {
  kernels::Kernels& k;
  int64_t n;
  float *a, *b, *c;
  void run() {
    k.gemm(kernels::Trans::N, kernels::Trans::T, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    k.synchronize();
  }
};

// Every rank alternates the chunk with an all-gather in its pair (`group`: this rank and its
// partner, or this rank alone), through the trainer's own communicator: its non-blocking call and
// its wait (yield, then sleep between polls) are how a rehearsal's TP group waits for a peer.
// The means over the timed iterations (after 5 untimed ones), averaged over the ranks.
ProbePhase alternate(comm::World& world, Chunk& chunk, int color, int key, size_t floats, int64_t iterations,
                     bool measured) {
  std::unique_ptr<comm::World> pair = world.split(color, key);
  const int size = pair->size(), rank = world.rank();
  std::vector<int> members(static_cast<size_t>(size));
  pair->all_gather(&rank, members.data(), sizeof rank);
  const std::unique_ptr<comm::Communicator> communicator =
      pair->communicator("probe", members, std::make_shared<comm::CommContext>());
  comm::Communicator& group = *communicator;
  std::vector<float> send(floats, 1.0f), recv(floats * size_t(size));
  ProbePhase ph;
  ph.measured = measured;
  double compute = 0, exchange = 0;
  world.barrier();
  for (int64_t i = -5; i < iterations; ++i) {
    const double t0 = wall_now();
    chunk.run();
    const double t1 = wall_now();
    group.all_gather(send.data(), recv.data(), floats, comm::DType::F32);
    if (i >= 0) compute += t1 - t0, exchange += wall_now() - t1;
  }
  double mine[2] = {compute / double(iterations), exchange / double(iterations)}, sum[2] = {0, 0};
  world.all_reduce(mine, sum, 2, comm::ReduceOp::Sum);
  ph.compute_s = sum[0] / world.size();
  ph.exchange_s = sum[1] / world.size();
  return ph;
}

}  // namespace

PlacementProbe measure_placement(comm::World& ranks, double message_bytes, double chunk_flops, int64_t iterations) {
  PlacementProbe p;
  const int rank = ranks.rank(), world = ranks.size();
  // Hosts: MPI's shared-memory nodes (an emulated host is a node to MPI), numbered by their
  // lowest world rank; every rank learns its host and its place in it.
  std::unique_ptr<comm::World> host = ranks.split_host(rank);
  const int local = host->rank(), per_host = host->size();
  int leader = rank;
  host->broadcast(&leader, sizeof leader, 0);
  std::vector<int> leaders(size_t(world), 0);
  ranks.all_gather(&leader, leaders.data(), sizeof leader);
  const std::set<int> distinct(leaders.begin(), leaders.end());
  const std::vector<int> order(distinct.begin(), distinct.end());
  const int hosts = int(order.size());
  const int h = int(std::find(order.begin(), order.end(), leader) - order.begin());
  p.ranks = world, p.hosts = hosts, p.ranks_per_host = per_host, p.iterations = iterations;
  p.gemm_n = std::max<int64_t>(8, int64_t(std::lround(std::cbrt(chunk_flops / 2))));
  auto k = kernels::make_cpu_kernels(1);
  const size_t count = size_t(p.gemm_n * p.gemm_n);
  std::vector<float> host_values(count);
  for (size_t i = 0; i < count; ++i) host_values[i] = 1e-3f * float(i % 97);
  Chunk chunk{*k, p.gemm_n, k->alloc(count), k->alloc(count), k->alloc(count)};
  k->from_host(chunk.a, host_values.data(), count);
  k->from_host(chunk.b, host_values.data(), count);

  ranks.sleeping_barrier();  // rank 0's time alone is of a core it has alone
  if (rank == 0) {
    double best = 1e30;
    for (int i = 0; i < 50; ++i) {
      const double t0 = cpu_now();
      chunk.run();
      if (const double dt = cpu_now() - t0; dt > 0) best = std::min(best, dt);
    }
    p.alone_cpu_s = best;
  }
  ranks.sleeping_barrier();
  ranks.broadcast(&p.alone_cpu_s, sizeof p.alone_cpu_s, 0);

  const size_t floats = size_t(std::max(1.0, std::round(message_bytes / 4)));
  p.message_bytes = 4.0 * double(floats);
  // Inside a host: pairs of neighbours (local 0-1, 2-3, ...; a last odd one alone).
  p.intra = alternate(ranks, chunk, h * per_host + local / 2, local, floats, iterations, per_host >= 2);
  // Between hosts: the same place on hosts 0-1, 2-3, ... (a last odd host alone).
  p.inter = alternate(ranks, chunk, (h / 2) * per_host + local, h, floats, iterations, hosts >= 2);
  k->free(chunk.a, count);
  k->free(chunk.b, count);
  k->free(chunk.c, count);
  return p;
}

nlohmann::json probe_json(const PlacementProbe& p) {
  auto phase = [](const ProbePhase& ph) {
    return nlohmann::json{{"measured", ph.measured}, {"compute_s", ph.compute_s}, {"exchange_s", ph.exchange_s}};
  };
  return {{"ranks", p.ranks},          {"hosts", p.hosts},        {"ranks_per_host", p.ranks_per_host},
          {"iterations", p.iterations}, {"gemm_n", p.gemm_n},      {"message_bytes", p.message_bytes},
          {"alone_cpu_s", p.alone_cpu_s}, {"intra", phase(p.intra)}, {"inter", phase(p.inter)}};
}

PlacementProbe probe_from_json(const nlohmann::json& j) {
  auto get = [&](const nlohmann::json& o, const char* key) {
    if (!o.is_object() || !o.contains(key) || !(o[key].is_number() || o[key].is_boolean()))
      throw std::runtime_error(std::string("the placement probe's file has no number '") + key + "'");
    return o[key];
  };
  auto phase = [&](const char* key) {
    if (!j.contains(key)) throw std::runtime_error(std::string("the placement probe's file has no '") + key + "'");
    const auto& o = j[key];
    return ProbePhase{get(o, "measured").get<bool>(), get(o, "compute_s").get<double>(),
                      get(o, "exchange_s").get<double>()};
  };
  PlacementProbe p;
  p.ranks = get(j, "ranks").get<int64_t>(), p.hosts = get(j, "hosts").get<int64_t>();
  p.ranks_per_host = get(j, "ranks_per_host").get<int64_t>(), p.iterations = get(j, "iterations").get<int64_t>();
  p.gemm_n = get(j, "gemm_n").get<int64_t>(), p.message_bytes = get(j, "message_bytes").get<double>();
  p.alone_cpu_s = get(j, "alone_cpu_s").get<double>();
  p.intra = phase("intra"), p.inter = phase("inter");
  return p;
}

PlacementInputs placement_inputs(const PlacementProbe& p, double intra_Bps, double inter_Bps) {
  PlacementInputs in;
  double compute = 0;
  int phases = 0;
  for (const ProbePhase* ph : {&p.intra, &p.inter})
    if (ph->measured) compute += ph->compute_s, ++phases;
  compute = phases > 0 ? compute / phases : p.alone_cpu_s;
  in.compute_share = compute > 0 ? std::min(1.0, p.alone_cpu_s / compute) : 1.0;
  const double us = 1e6;
  in.text = fmt::format(
      "  placement probe: {} ranks on {} hosts of {}, all at once, {} times a {}^3 sgemm then a pair's all-gather "
      "of {:.0f} bytes from each (the trainer's communicator and wait)\n    compute share per rank: the sgemm alone {:.1f} us (best CPU time) / its mean wall "
      "time in the probe {:.1f} us{} = {:.3f}{}\n",
      p.ranks, p.hosts, p.ranks_per_host, p.iterations, p.gemm_n, p.message_bytes, p.alone_cpu_s * us, compute * us,
      phases == 2 ? fmt::format(" (mean of {:.1f} inside a host and {:.1f} between hosts)", p.intra.compute_s * us,
                                p.inter.compute_s * us)
                  : "",
      in.compute_share, p.alone_cpu_s > compute ? " (above 1: taken as 1)" : "");
  auto latency = [&](const ProbePhase& ph, double Bps, const char* what, double& wire) {
    wire = Bps > 0 ? p.message_bytes / Bps : 0;
    const double lat = std::max(0.0, ph.exchange_s - wire);
    in.text += fmt::format("    {} latency: exchange {:.1f} us - {:.0f} bytes at {:.4f} GB/s ({:.1f} us) = {:.1f} us{}\n",
                           what, ph.exchange_s * us, p.message_bytes, Bps / 1e9, wire * us, lat * us,
                           ph.exchange_s < wire ? " (below 0: taken as 0)" : "");
    return lat;
  };
  if (p.intra.measured) in.intra_latency_s = latency(p.intra, intra_Bps, "inside a host", in.intra_wire_s);
  if (p.inter.measured) in.inter_latency_s = latency(p.inter, inter_Bps, "between hosts", in.inter_wire_s);
  return in;
}

}  // namespace trident::measure
