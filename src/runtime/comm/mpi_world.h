// MpiWorld: the World interface over an MPI communicator (world.h). With mpi_communicator.cpp,
// the only code that calls MPI; the rest of Trident sees World and Communicator.
#pragma once

#include <mpi.h>

#include "runtime/comm/world.h"

namespace trident::comm {

class MpiWorld final : public World {
 public:
  // A world over comm, freed on destruction when owned (never MPI_COMM_WORLD). Tests build
  // process groups over a sub-communicator this way.
  explicit MpiWorld(MPI_Comm comm, bool owned = false);
  ~MpiWorld() override;
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm handle() const { return comm_; }
  std::unique_ptr<World> split(int colour, int key) override;
  std::unique_ptr<World> split_host(int key) override;
  void all_gather(const void* mine, void* all, size_t bytes) override;
  void broadcast(void* buffer, size_t bytes, int root) override;
  void all_reduce(const double* send, double* recv, size_t count, ReduceOp op) override;
  void all_reduce(const float* send, float* recv, size_t count, ReduceOp op) override;
  void send(const void* buffer, size_t bytes, int peer) override;
  void recv(void* buffer, size_t bytes, int peer) override;
  void barrier() override;
  void sleeping_barrier() override;
  [[noreturn]] void abort(int code) override;
  // MPI_COMM_WORLD's communicator shares its handle; any other is a duplicate the communicator owns.
  std::unique_ptr<Communicator> communicator(const std::string& name, std::vector<int> world_ranks,
                                             std::shared_ptr<CommContext> context) override;

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace trident::comm
