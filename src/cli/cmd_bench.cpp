// trident bench: measure this machine (matrix-product rate, memory bandwidth, MPI latency and
// bandwidth) and write it as a cluster description, a [cluster] table the planner reads
// (--config FILE, or the rehearsal report's --prediction-cluster FILE).
//
// One MPI rank runs on one CPU core, so a "GPU" of the description is one core: its compute
// rate is a one-thread sgemm, gpus-per-node is the number of cores. Run it as
// `mpirun -np 2 trident bench` to measure MPI between two ranks; alone it measures a memcpy
// (what MPI's shared-memory transport does) and says so.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "core/output_path.h"
#include "core/problems.h"
#include "plan/cost_model.h"
#include "runtime/engine/perf.h"
#include "runtime/kernels/ops.h"

namespace trident::cli {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

struct BenchArgs {
  std::string out = "trident-cluster.toml";
  double mpi_mib = 8;
};

// Best-of-5 time of copying `bytes` between two buffers (read + write counted once each way
// as STREAM's "copy": 2 x bytes moved).
double copy_bandwidth_Bps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = clock_type::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, since(t0));
    a[rep] = b[bytes - 1 - rep];  // keep the copies observable
  }
  return 2.0 * double(bytes) / best;
}

// Ping-pong between world ranks 0 and 1: half the best round trip of `bytes`.
double ping_pong_s(size_t bytes, int rank) {
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = clock_type::now();
    if (rank == 0) {
      MPI_Send(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), int(bytes), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    best = std::min(best, since(t0) / 2);
  }
  return best;
}

int run_bench(const BenchArgs& a) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  auto k1 = kernels::make_cpu_kernels(1);
  const double flops_1 = rank == 0 ? engine::measure_matmul_flops(*k1) : 0.0;
  const double hbm = rank == 0 ? copy_bandwidth_Bps(size_t(256) << 20) : 0.0;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double ram = double(pages) * double(page);

  double latency = 0, bandwidth = 0;
  std::string how;
  const size_t big = size_t(a.mpi_mib * (1 << 20));
  if (world >= 2) {
    latency = ping_pong_s(8, rank);
    const double t = ping_pong_s(big, rank);
    bandwidth = double(big) / std::max(1e-12, t - latency);
    how = "MPI ping-pong between ranks 0 and 1 (" + std::to_string(world) + " ranks)";
  } else {
    bandwidth = copy_bandwidth_Bps(big) / 2;  // one direction of one copy
    latency = 1e-6;
    how = "memcpy only (one rank): run `mpirun -np 2 trident bench` to measure MPI itself";
  }
  // The planner applies its own achieved-over-peak factors to the "peak" it is given (a large
  // GEMM reaches gemm_efficiency of it, memory-bound kernels hbm_efficiency). Our figures are
  // already achieved rates, so write the peaks that make the planner reproduce them.
  const plan::CostConstants& constants = plan::default_constants();
  const double gemm_eff = plan::gemm_efficiency(1536, 1536, 1536, constants);
  const double peak_flops = flops_1 / gemm_eff;
  const double peak_hbm = hbm / constants.hbm_efficiency;
  const double link_eff = plan::link_efficiency(LinkKind::PCIe, constants);  // the link kind written below
  if (rank == 0) {
    char text[2048];
    std::snprintf(text, sizeof text,
                  "# This machine as a Trident cluster, measured by `trident bench`.\n"
                  "# One MPI rank = one CPU core = one \"GPU\" below. Inputs: a 1536^3 sgemm on one thread\n"
                  "# (%.2f GFLOP/s), a 256 MiB memcpy (%.2f GB/s counting read + write), %s:\n"
                  "# %.2f us for 8 bytes, %.3f GB/s for %.0f MiB. %d cores, %.1f GiB of memory.\n"
                  "# The planner reaches %.3f of a peak on a 1536^3 GEMM and %.2f of memory bandwidth,\n"
                  "# and %.2f of a PCIe link's bandwidth, so the peaks below are the measured rates divided\n"
                  "# by those shares.\n"
                  "[cluster]\n"
                  "nodes = 1\n"
                  "gpus-per-node = %d\n"
                  "gpu-memory-gib = %.3f\n"
                  "gpu-fp32-tflops = %.6f\n"
                  "gpu-bf16-tflops = %.6f\n"
                  "gpu-hbm-gbytes-per-s = %.3f\n"
                  "intra-link = \"pcie\"\n"
                  "intra-gbytes-per-s = %.4f\n"
                  "intra-latency-us = %.3f\n"
                  "inter-link = \"ethernet\"\n"
                  "inter-node-gbytes-per-s = %.4f\n"
                  "inter-latency-us = %.3f\n",
                  flops_1 / 1e9, hbm / 1e9, how.c_str(), latency * 1e6, bandwidth / 1e9, a.mpi_mib, cores,
                  ram / double(1 << 30), gemm_eff, constants.hbm_efficiency, link_eff, cores, ram / double(1 << 30) / cores,
                  peak_flops / 1e12, peak_flops / 1e12, peak_hbm / 1e9, bandwidth / link_eff / 1e9, latency * 1e6, bandwidth / link_eff / 1e9,
                  latency * 1e6);
    std::printf("%s", text);
    try {
      write_text_atomically(a.out, text);
    } catch (const InputError& e) {
      std::fprintf(stderr, "trident bench: %s\n", e.problems().front().what.c_str());
      MPI_Finalize();
      return 1;
    }
    std::printf("wrote %s (use it with --config %s, or --prediction-cluster for the rehearsal report)\n",
                a.out.c_str(), a.out.c_str());
  }
  MPI_Finalize();
  return 0;
}

Runner setup_bench(CLI::App& cmd) {
  auto args = std::make_shared<BenchArgs>();
  cmd.add_option("--out", args->out, "cluster TOML to write (default trident-cluster.toml)");
  cmd.add_option("--mpi-mib", args->mpi_mib, "message size for the MPI bandwidth, MiB (default 8)");
  return [args] {
    Problems p;
    if (!(args->mpi_mib >= 0.001 && args->mpi_mib <= 1024))  // also refuses NaN
      p.add("--mpi-mib " + std::to_string(args->mpi_mib) + " is outside 0.001 .. 1024", "give e.g. --mpi-mib 8",
            "option-range");
    check_outputs({{args->out, "--out"}}, {}, p);
    p.throw_if_any();
    return run_bench(*args);
  };
}

TRIDENT_COMMAND("bench", "measure this machine (matmul rate, memory and MPI bandwidth) and write a cluster TOML",
                setup_bench);

}  // namespace
}  // namespace trident::cli
