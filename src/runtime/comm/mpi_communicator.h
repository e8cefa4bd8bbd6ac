// MpiCommunicator: the Communicator interface over OpenMPI, for CPU ranks.
//
// Every operation, blocking or not, is started as a non-blocking MPI call and completed by
// polling MPI_Test against a deadline, so a peer that never arrives turns into a CommTimeout
// naming this rank, the group, the operation and the peer instead of a silent hang. MPI errors
// are returned (MPI_ERRORS_RETURN), never fatal, and become CommError with the MPI message.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/comm_trace.h"
#include "runtime/comm/communicator.h"

namespace trident::comm {

MPI_Datatype mpi_type(DType t);
const char* reduce_op_name(ReduceOp op);

// A barrier over `comm` that the waiting ranks sleep through (a spinning MPI_Barrier would take
// the core a measuring rank needs when ranks share cores).
void sleeping_barrier(MPI_Comm comm);

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed on destruction unless it is MPI_COMM_WORLD). world_ranks[i]
  // is the world rank of this group's rank i, for messages.
  MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks,
                  std::shared_ptr<CommContext> context);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // A communicator on MPI_COMM_WORLD (not owned).
  static std::unique_ptr<MpiCommunicator> world(std::shared_ptr<CommContext> context);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  MPI_Comm handle() const { return comm_; }
  int world_rank_of(int group_rank) const { return world_ranks_.at(group_rank); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  CommContext& context() const { return *context_; }

  void all_reduce(void* buffer, size_t count, DType type, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType type) override;
  void all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                    DType type) override;
  void broadcast(void* buffer, size_t count, DType type, int root) override;
  void barrier() override;
  void send(const void* buffer, size_t count, DType type, int peer, int tag) override;
  void recv(void* buffer, size_t count, DType type, int peer, int tag) override;

  RequestPtr all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) override;
  RequestPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                  ReduceOp op) override;
  RequestPtr all_gather_async(const void* send, void* recv, size_t send_count, DType type) override;
  RequestPtr isend(const void* buffer, size_t count, DType type, int peer, int tag) override;
  RequestPtr irecv(void* buffer, size_t count, DType type, int peer, int tag) override;

  // In-place all-reduce of doubles (loss sums, squared norms), with the same timeout and trace.
  // MPI only: the Communicator interface carries no f64.
  void all_reduce_f64(double* buffer, size_t count, ReduceOp op);

 private:
  // Describes an operation for traces and errors: "tp[1/2] all_reduce 4096 f32 sum".
  std::string describe(const std::string& what) const;
  RequestPtr make_request(MPI_Request request, std::string description, bool point_to_point = false);
  void check(int mpi_error, const std::string& description) const;

  MPI_Comm comm_;
  bool owned_;
  std::string name_;
  std::vector<int> world_ranks_;
  std::shared_ptr<CommContext> context_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace trident::comm
