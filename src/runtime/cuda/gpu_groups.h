// How the process groups of a CUDA run talk: each group's MPI communicator (made by the process
// groups from the Mesh) becomes the communicator the trainer uses on GPU buffers.
//   nccl      one rank per GPU: NcclCommunicator over the group (NCCL id sent over MPI), on its
//             own stream ordered after the kernels' stream. The production path.
//   mpi-host  the MPI communicator staging every buffer through host memory
//             (HostStagedCommunicator; Debian's OpenMPI is not CUDA-aware), so several ranks can
//             share one GPU: for testing layouts on a one-GPU machine.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/cuda/cuda_kernels.h"

namespace trident::cuda {

enum class GpuComm { Nccl, MpiHost };

// "nccl" / "mpi-host"; anything else is an InputError naming the value and the choices.
GpuComm parse_gpu_comm(const std::string& value);
const char* gpu_comm_name(GpuComm c);

// The group's communicator for a CUDA run. mpi_group is the group's MPI communicator and
// handle its MPI_Comm (NCCL borrows it only to send its id, so the MPI object may be kept or
// dropped by the caller; mpi-host wraps and owns it).
std::unique_ptr<comm::Communicator> make_gpu_group(std::unique_ptr<comm::Communicator> mpi_group, MPI_Comm handle,
                                                   CudaKernels& k, GpuComm how);

}  // namespace trident::cuda
