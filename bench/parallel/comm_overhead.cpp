// Cost of Trident's MpiCommunicator (non-blocking start + polling against a timeout) against
// the blocking OpenMPI calls it wraps, on 2 ranks: all-reduce and a ping-pong for several
// sizes. Prints time per call for both and the ratio Trident / MPI (1.00 = no overhead).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "runtime/comm/mpi_communicator.h"

using namespace trident::comm;
using clock_type = std::chrono::steady_clock;

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = clock_type::now();
    f();
    double t = std::chrono::duration<double>(clock_type::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, t);
  }
  return best;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto ctx = std::make_shared<CommContext>();
  ctx->world_rank = rank;
  auto world = MpiCommunicator::world(ctx);
  if (rank == 0)
    std::printf("%10s %14s %14s %7s %14s %14s %7s\n", "floats", "allreduce MPI", "Trident", "ratio", "pingpong MPI",
                "Trident", "ratio");
  for (size_t n : {size_t(1) << 8, size_t(1) << 12, size_t(1) << 16, size_t(1) << 20, size_t(1) << 22}) {
    std::vector<float> buf(n, 1.0f);
    const int reps = n >= (1u << 20) ? 10 : 50;
    double mpi_ar = best_of(reps, [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    double tri_ar = best_of(reps, [&] { world->all_reduce(buf.data(), n, DType::F32, ReduceOp::Sum); });
    const int peer = rank ^ 1;
    double mpi_pp = 0, tri_pp = 0;
    if (size >= 2 && peer < size) {
      mpi_pp = best_of(reps, [&] {
        if (rank % 2 == 0) {
          MPI_Send(buf.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(buf.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf.data(), int(n), MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
        }
      });
      tri_pp = best_of(reps, [&] {
        if (rank % 2 == 0) {
          world->send(buf.data(), n, DType::F32, peer, 0);
          world->recv(buf.data(), n, DType::F32, peer, 0);
        } else {
          world->recv(buf.data(), n, DType::F32, peer, 0);
          world->send(buf.data(), n, DType::F32, peer, 0);
        }
      });
    }
    if (rank == 0)
      std::printf("%10zu %11.1f us %11.1f us %7.2f %11.1f us %11.1f us %7.2f\n", n, mpi_ar * 1e6, tri_ar * 1e6,
                  tri_ar / mpi_ar, mpi_pp * 1e6, tri_pp * 1e6, mpi_pp > 0 ? tri_pp / mpi_pp : 0.0);
  }
  world.reset();
  MPI_Finalize();
  return 0;
}
