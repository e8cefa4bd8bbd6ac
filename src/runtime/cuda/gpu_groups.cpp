#include "runtime/cuda/gpu_groups.h"

#include <cuda_runtime.h>

#include "core/problems.h"
#include "runtime/comm/host_staged_communicator.h"
#include "runtime/cuda/nccl_communicator.h"
#include "runtime/cuda/cuda_check.h"

namespace trident::cuda {

GpuComm parse_gpu_comm(const std::string& value) {
  if (value == "nccl") return GpuComm::Nccl;
  if (value == "mpi-host") return GpuComm::MpiHost;
  throw InputError({{"--gpu-comm '" + value + "' is unknown",
                     "use --gpu-comm nccl (one rank per GPU) or --gpu-comm mpi-host (ranks share GPUs; tests)",
                     "gpu-comm"}});
}

const char* gpu_comm_name(GpuComm c) { return c == GpuComm::Nccl ? "nccl" : "mpi-host"; }

std::unique_ptr<comm::Communicator> make_gpu_group(std::unique_ptr<comm::Communicator> host_group, comm::World& group,
                                                   CudaKernels& k, GpuComm how) {
  if (how == GpuComm::Nccl) return std::make_unique<comm::NcclCommunicator>(group, host_group->name(), k.stream());
  // cudaMemcpyDefault: the trainer may also pass host buffers (unified addressing tells them apart).
  cudaStream_t stream = k.stream();
  auto copy = [stream](void* dst, const void* src, size_t bytes) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    cudaCheck(cudaStreamSynchronize(stream));
  };
  return std::make_unique<comm::HostStagedCommunicator>(std::move(host_group), copy, copy);
}

}  // namespace trident::cuda
