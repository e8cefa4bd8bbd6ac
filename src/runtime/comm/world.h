// World: the processes of a run, and the few collectives their start-up needs.
//
// The bootstrap's one interface: rank and size, splitting into sub-worlds (the process groups,
// a host's ranks), gathering, broadcasting and reducing small host values (the run agreement,
// the resource check, the placement probe, the benches), barriers, and aborting every process.
// A world also makes the data communicator of its ranks (communicator.h), which the trainer's
// collectives go through. Two implementations: MPI (mpi_world.h, the only code that calls MPI
// with mpi_communicator.cpp) and a world of one process (SelfWorld below, no MPI touched).
// Worlds are objects passed down explicitly: there is no global world.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/comm_trace.h"
#include "runtime/comm/communicator.h"

namespace trident::comm {

class World {
 public:
  virtual ~World() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Collective over this world: the ranks giving the same colour form a new world, ranked by
  // key (ties by rank). A rank giving kNoColour takes part and gets null.
  static constexpr int kNoColour = -1;
  virtual std::unique_ptr<World> split(int colour, int key) = 0;
  // Collective: the ranks of this rank's host (shared memory; an emulated host is one), ranked by key.
  virtual std::unique_ptr<World> split_host(int key) = 0;

  // Every rank's `bytes` bytes at `mine`, concatenated in rank order into `all` (size() * bytes).
  virtual void all_gather(const void* mine, void* all, size_t bytes) = 0;
  // Root's `bytes` bytes at `buffer` to every rank. Throws CommError when the transfer fails.
  virtual void broadcast(void* buffer, size_t bytes, int root) = 0;
  // Element-wise reduction over every rank into recv on every rank (send == recv: in place).
  virtual void all_reduce(const double* send, double* recv, size_t count, ReduceOp op) = 0;
  virtual void all_reduce(const float* send, float* recv, size_t count, ReduceOp op) = 0;
  // Blocking transfer of raw bytes to / from a rank of this world (the benches' ping-pong).
  virtual void send(const void* buffer, size_t bytes, int peer) = 0;
  virtual void recv(void* buffer, size_t bytes, int peer) = 0;
  virtual void barrier() = 0;
  // A barrier the waiting ranks sleep through (a spinning one would take the core a measuring
  // rank needs when ranks share cores).
  virtual void sleeping_barrier() = 0;
  // Stops every process of the run with exit status `code` (the others would wait on this one).
  [[noreturn]] virtual void abort(int code) = 0;

  // The data communicator over this world's ranks: `name` for traces and errors ("tp"),
  // world_ranks[i] the run's rank of this world's rank i (for messages).
  virtual std::unique_ptr<Communicator> communicator(const std::string& name, std::vector<int> world_ranks,
                                                     std::shared_ptr<CommContext> context) = 0;
};

// Every rank's string, in rank order (lengths gathered first, then the padded texts).
std::vector<std::string> all_gather_strings(World& world, const std::string& mine);

// A world of one process: splits give worlds of one, gathers copy, reductions and barriers do
// nothing, point-to-point has no peer (throws), abort exits the process.
class SelfWorld final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::unique_ptr<World> split(int colour, int key) override;
  std::unique_ptr<World> split_host(int key) override;
  void all_gather(const void* mine, void* all, size_t bytes) override;
  void broadcast(void*, size_t, int) override {}
  void all_reduce(const double* send, double* recv, size_t count, ReduceOp op) override;
  void all_reduce(const float* send, float* recv, size_t count, ReduceOp op) override;
  void send(const void*, size_t, int peer) override;
  void recv(void*, size_t, int peer) override;
  void barrier() override {}
  void sleeping_barrier() override {}
  [[noreturn]] void abort(int code) override;
  std::unique_ptr<Communicator> communicator(const std::string& name, std::vector<int> world_ranks,
                                             std::shared_ptr<CommContext> context) override;
};

// The run's world: MPI's (initialising MPI, threads funneled, unless it already is) when `mpi`
// (started by mpirun), else a SelfWorld. close_world ends it: MPI_Finalize for MPI's.
std::unique_ptr<World> open_world(bool mpi);
// MPI's world even without mpirun (a singleton: `trident bench` alone).
std::unique_ptr<World> open_mpi_world();
void close_world(std::unique_ptr<World> world);

// In-place all-reduce of doubles (loss sums, squared norms) over a data communicator: MPI's own
// f64 reduction on MPI groups, nothing on a group of one, otherwise an all-gather of the bytes
// summed in rank order (the same result on every rank).
void all_reduce_f64(Communicator& group, double* values, size_t count, ReduceOp op);

}  // namespace trident::comm
