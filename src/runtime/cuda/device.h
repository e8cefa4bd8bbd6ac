// Choosing the GPU of this process and reporting clearly when there is none.
//
// One rank per GPU: the GPU index is the node-local rank, read from the launcher's
// environment (OpenMPI, MPICH/MVAPICH, Slurm, torchrun), 0 when started alone.
#pragma once

#include <cstddef>
#include <string>

namespace trident::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t total_bytes = 0, free_bytes = 0;
};

// The node-local rank from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID or
// LOCAL_RANK (first one set), else 0.
int local_rank_from_env();
// Ranks on this node from OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or LOCAL_WORLD_SIZE
// (first one set), else 1.
int local_size_from_env();

// Number of usable GPUs; 0 with *why set to CUDA's reason when there are none.
int gpu_count(std::string* why = nullptr);

// Makes GPU `local_rank` current and describes it. Throws InputError naming the cause when no
// GPU is usable, when the local rank has no GPU of its own, or when the GPU is older than
// sm_80 (bf16 tensor cores).
DeviceInfo select_gpu(int local_rank);

// The GPU of this rank in a run of local_size ranks per node. One rank per GPU (NCCL): more
// ranks than GPUs is an InputError naming both counts and the fix. share = true (several ranks
// on one GPU, host-staged MPI) takes GPU local_rank % count instead.
DeviceInfo select_gpu_for_rank(int local_rank, int local_size, bool share);

}  // namespace trident::cuda
