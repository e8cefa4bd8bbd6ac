// HostStagedCommunicator: a Communicator over device buffers for a backend that reads only host
// memory (Debian's OpenMPI is not CUDA-aware). Every buffer is copied to host scratch, the inner
// communicator runs on the copy, and results are copied back; asynchronous operations copy back
// when they complete. bf16 reductions, which MPI cannot do, run in fp32 on the host copy; bf16
// moves stay bytes.
//
// For testing several ranks on ONE GPU (an explicit option: it costs two host copies per
// message). Separate GPUs use NcclCommunicator. The copies are injected, so the wrapper itself
// depends on no device library (a test can pass memcpy).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/comm/communicator.h"

namespace trident::comm {

class HostStagedCommunicator final : public Communicator {
 public:
  using Copy = std::function<void(void* dst, const void* src, size_t bytes)>;
  HostStagedCommunicator(std::unique_ptr<Communicator> inner, Copy to_host, Copy to_device);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }

  void all_reduce(void* buffer, size_t count, DType type, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType type) override;
  void broadcast(void* buffer, size_t count, DType type, int root) override;
  void all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                    DType type) override;
  void barrier() override { inner_->barrier(); }
  void send(const void* buffer, size_t count, DType type, int peer, int tag) override;
  void recv(void* buffer, size_t count, DType type, int peer, int tag) override;

  RequestPtr all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) override;
  RequestPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                  ReduceOp op) override;
  RequestPtr all_gather_async(const void* send, void* recv, size_t send_count, DType type) override;
  RequestPtr isend(const void* buffer, size_t count, DType type, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType type, int peer, int tag) override;

 private:
  std::unique_ptr<Communicator> inner_;
  Copy to_host_, to_device_;
};

}  // namespace trident::comm
