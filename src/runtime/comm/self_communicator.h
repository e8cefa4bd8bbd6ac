// SelfCommunicator: the Communicator of a group of one rank (this process alone).
//
// A one-process run is a world of one: the trainer builds every process group from this
// class instead of MPI, so `trident train` and `trident generate` run without mpirun and
// without MPI's start-up cost. Reductions over one rank leave the data as it is; gathers and
// scatters copy send to recv (host memory: a one-process run reduces only host scalars, since
// tp = dp = pp = 1 hand no communicator to the model). Point-to-point has no peer and throws.
#pragma once

#include "runtime/comm/communicator.h"

namespace trident::comm {

class SelfCommunicator final : public Communicator {
 public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }

  void all_reduce(void*, size_t, DType, ReduceOp) override {}
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType type) override;
  void all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                    DType type) override;
  void broadcast(void*, size_t, DType, int) override {}
  void barrier() override {}
  void send(const void*, size_t, DType, int peer, int) override;
  void recv(void*, size_t, DType, int peer, int) override;

  RequestPtr all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) override;
  RequestPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) override;
  RequestPtr all_gather_async(const void* send, void* recv, size_t send_count, DType type) override;
  RequestPtr isend(const void* buffer, size_t count, DType type, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType type, int peer, int tag) override;

 private:
  std::string name_;
};

}  // namespace trident::comm
