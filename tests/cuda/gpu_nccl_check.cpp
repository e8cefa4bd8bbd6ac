// GPU check (needs a GPU; run by scripts/gpu-check.sh under mpirun, one rank per GPU): every
// operation of NcclCommunicator on real GPU buffers, values checked on the host, including an
// async all-reduce that runs while a kernel of the compute stream is still going.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <numeric>
#include <vector>

#include "runtime/comm/mpi_world.h"
#include "runtime/cuda/nccl_communicator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/kernels.h"

using namespace trident;

namespace {
int failures = 0;
void expect(bool ok, const char* what, int rank) {
  if (!ok) ++failures;
  if (rank == 0 || !ok) std::printf("%-4s rank %d: %s\n", ok ? "ok" : "FAIL", rank, what);
}
std::vector<float> host(const float* d, size_t n) {
  std::vector<float> v(n);
  cudaCheck(cudaDeviceSynchronize());
  cudaCheck(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    cuda::select_gpu(cuda::local_rank_from_env());
    cudaStream_t compute;
    cudaCheck(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    comm::MpiWorld world(MPI_COMM_WORLD);  // the NCCL id is broadcast over it
    comm::NcclCommunicator c(world, "world", compute, 60.0);
    const size_t n = 1 << 20;
    float *a, *g, *big;
    cudaCheck(cudaMalloc(&a, n * size * sizeof(float)));
    cudaCheck(cudaMalloc(&g, n * size * sizeof(float)));
    cudaCheck(cudaMalloc(&big, (size_t(64) << 20) * sizeof(float)));
    std::vector<float> mine(n * size, float(rank + 1));
    const float sum = float(size * (size + 1) / 2);

    cudaCheck(cudaMemcpy(a, mine.data(), n * size * sizeof(float), cudaMemcpyHostToDevice));
    c.all_reduce(a, n, comm::DType::F32, comm::ReduceOp::Sum);
    auto r = host(a, n);
    expect(r.front() == sum && r.back() == sum, "all_reduce sum", rank);

    cudaCheck(cudaMemcpy(a, mine.data(), n * size * sizeof(float), cudaMemcpyHostToDevice));
    c.all_reduce(a, n, comm::DType::F32, comm::ReduceOp::Max);
    expect(host(a, 1)[0] == float(size), "all_reduce max", rank);

    cudaCheck(cudaMemcpy(a, mine.data(), n * size * sizeof(float), cudaMemcpyHostToDevice));
    c.reduce_scatter(a, g, n, comm::DType::F32, comm::ReduceOp::Sum);
    r = host(g, n);
    expect(r.front() == sum && r.back() == sum, "reduce_scatter sum", rank);

    cudaCheck(cudaMemcpy(a, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    c.all_gather(a, g, n, comm::DType::F32);
    r = host(g, n * size);
    bool gathered = true;
    for (int k = 0; k < size; ++k) gathered &= r[size_t(k) * n] == float(k + 1) && r[size_t(k + 1) * n - 1] == float(k + 1);
    expect(gathered, "all_gather in rank order", rank);

    cudaCheck(cudaMemcpy(a, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    c.broadcast(a, n, comm::DType::F32, 0);
    expect(host(a, 1)[0] == 1.0f, "broadcast from rank 0", rank);
    c.barrier();
    expect(true, "barrier", rank);

    if (size > 1) {
      const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
      cudaCheck(cudaMemcpy(a, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      auto s = c.isend(a, n, comm::DType::F32, next, 0);
      auto q = c.irecv(g, n, comm::DType::F32, prev, 0);
      s->wait();
      q->wait();
      expect(host(g, 1)[0] == float(prev + 1), "isend/irecv ring", rank);
    }

    // Overlap: queue a long GELU on the compute stream, then an async all-reduce of another
    // buffer; the all-reduce must wait for the compute work queued before it (ordering), and
    // the result must be right.
    cudaCheck(cudaMemcpy(a, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cuda::gelu_forward<float>(big, big, size_t(64) << 20, compute);
    cuda::residual_forward<float>(a, a, a, n, compute);  // a = 2 (rank + 1), queued before the reduce
    auto req = c.all_reduce_async(a, n, comm::DType::F32, comm::ReduceOp::Sum);
    req->wait();
    expect(host(a, 1)[0] == 2 * sum, "async all_reduce ordered after queued compute", rank);
    cudaFree(a), cudaFree(g), cudaFree(big);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_nccl_check rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: NCCL communicator, %d rank(s), %d failure(s)\n", total ? "FAILED" : "PASSED", size, total);
  MPI_Finalize();
  return total ? 1 : 0;
}
