// How the process groups of a CUDA run talk: each group's host communicator and world (made by the
// process groups from the Mesh) become the communicator the trainer uses on GPU buffers.
//   nccl      one rank per GPU: NcclCommunicator over the group (NCCL id broadcast over its world), on its
//             own stream ordered after the kernels' stream. The production path.
//   mpi-host  the MPI communicator staging every buffer through host memory
//             (HostStagedCommunicator; Debian's OpenMPI is not CUDA-aware), so several ranks can
//             share one GPU: for testing layouts on a one-GPU machine.
#pragma once

#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/world.h"
#include "runtime/cuda/cuda_kernels.h"

namespace trident::cuda {

enum class GpuComm { Nccl, MpiHost };

// "nccl" / "mpi-host"; anything else is an InputError naming the value and the choices.
GpuComm parse_gpu_comm(const std::string& value);
const char* gpu_comm_name(GpuComm c);

// The group's communicator for a CUDA run. host_group is the group's host (MPI) communicator and
// group its world (NCCL borrows the world only to broadcast its id, and drops host_group;
// mpi-host wraps and owns host_group).
std::unique_ptr<comm::Communicator> make_gpu_group(std::unique_ptr<comm::Communicator> host_group, comm::World& group,
                                                   CudaKernels& k, GpuComm how);

}  // namespace trident::cuda
