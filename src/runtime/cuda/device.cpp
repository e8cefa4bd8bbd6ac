#include "runtime/cuda/device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>

#include "core/problems.h"
#include "runtime/cuda/cuda_check.h"

namespace trident::cuda {

int local_rank_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  }
  return 0;
}

int local_size_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE"}) {
    if (const char* value = std::getenv(name); value && *value) return std::max(1, std::atoi(value));
  }
  return 1;
}

int gpu_count(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls report their own
    return 0;
  }
  if (count == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return count;
}

DeviceInfo select_gpu(int local_rank) {
  Problems problems;
  std::string why;
  int count = gpu_count(&why);
  if (count == 0) {
    problems.add("--device cuda was asked, but no CUDA GPU is usable on this machine (" + why + ")",
                 "run on a machine with an NVIDIA GPU and its driver (check nvidia-smi and CUDA_VISIBLE_DEVICES), "
                 "or train on CPU ranks with --device cpu",
                 "no-gpu");
    problems.throw_if_any();
  }
  if (local_rank < 0 || local_rank >= count) {
    problems.add("node-local rank " + std::to_string(local_rank) + " needs GPU " + std::to_string(local_rank) +
                     " but only " + std::to_string(count) + " GPU(s) are visible",
                 "start at most " + std::to_string(count) + " ranks per node (one rank per GPU)", "rank-without-gpu");
    problems.throw_if_any();
  }
  cudaCheck(cudaSetDevice(local_rank));
  cudaDeviceProp prop{};
  cudaCheck(cudaGetDeviceProperties(&prop, local_rank));
  DeviceInfo info;
  info.index = local_rank;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  cudaCheck(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  if (info.major < 8) {
    problems.add("GPU " + std::to_string(local_rank) + " (" + info.name + ") has compute capability " +
                     std::to_string(info.major) + "." + std::to_string(info.minor) +
                     "; Trident's CUDA kernels are built for sm_80 and sm_90",
                 "use an Ampere (A100) or Hopper (H100/H200) GPU", "gpu-too-old");
    problems.throw_if_any();
  }
  return info;
}

DeviceInfo select_gpu_for_rank(int local_rank, int local_size, bool share) {
  std::string why;
  const int count = gpu_count(&why);
  if (count > 0 && !share && local_size > count) {
    Problems problems;
    problems.add("this node runs " + std::to_string(local_size) + " ranks but only " + std::to_string(count) +
                     " GPU(s) are visible, and NCCL needs one GPU per rank",
                 "start at most " + std::to_string(count) + " ranks per node (mpirun -np " + std::to_string(count) +
                     " per node), or pass --gpu-comm mpi-host to share GPUs through host-staged MPI (for tests; slow)",
                 "ranks-exceed-gpus");
    problems.throw_if_any();
  }
  return select_gpu(count > 0 && share ? local_rank % count : local_rank);
}

}  // namespace trident::cuda
