// NcclCommunicator: the Communicator interface over NCCL, for GPU ranks (one rank per GPU).
//
// Built collectively by every member of a group's world (runtime/comm/world.h): group rank 0
// makes the NCCL unique id and the world broadcasts it (over MPI, never through files). Buffers are GPU memory.
// NCCL runs on the communicator's own stream so that a data-parallel all-reduce or a pipeline
// send overlaps compute: each operation first waits (on the GPU) for the work already queued on
// the compute stream, and an async request's wait() makes the compute stream wait for it and
// then blocks the host until it is complete, polling NCCL for asynchronous errors against a
// deadline so a dead peer becomes an error naming the operation instead of a hang.
// Point-to-point tags are not used by NCCL: sends and receives between a pair of ranks match
// in the order they are issued, which is how the pipeline schedules issue them.
// Select the GPU first (cuda::select_gpu(cuda::local_rank_from_env())).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/world.h"

namespace trident::comm {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(World& group, std::string name, cudaStream_t compute_stream, double timeout_s = 300.0);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  cudaStream_t comm_stream() const { return comm_stream_; }

  void all_reduce(void* buffer, size_t count, DType type, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType type) override;
  void broadcast(void* buffer, size_t count, DType type, int root) override;
  void all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                    DType type) override;
  void barrier() override;
  void send(const void* buffer, size_t count, DType type, int peer, int tag) override;
  void recv(void* buffer, size_t count, DType type, int peer, int tag) override;

  RequestPtr all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) override;
  RequestPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                  ReduceOp op) override;
  RequestPtr all_gather_async(const void* send, void* recv, size_t send_count, DType type) override;
  RequestPtr isend(const void* buffer, size_t count, DType type, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType type, int peer, int tag) override;

 private:
  // Orders the comm stream after the compute stream's queued work.
  void begin();
  // Records completion on the comm stream and returns the request that waits for it.
  RequestPtr finish(std::string description);
  std::string describe(const char* what, size_t count, DType type) const;

  ncclComm_t comm_ = nullptr;
  std::string name_;
  int rank_ = 0, size_ = 1;
  cudaStream_t compute_stream_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  int* barrier_word_ = nullptr;  // device int for barrier(), allocated once
  double timeout_s_;
};

// NCCL's names for the interface's types; throws for a type NCCL cannot reduce.
ncclDataType_t nccl_type(DType t);
ncclRedOp_t nccl_op(ReduceOp op);

}  // namespace trident::comm
