#include "runtime/comm/mpi_world.h"

#include <climits>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "runtime/comm/mpi_communicator.h"

namespace trident::comm {

namespace {

MPI_Op op_of(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : op == ReduceOp::Max ? MPI_MAX : MPI_MIN; }

int count_of(size_t n, const char* what) {
  if (n > size_t(INT_MAX))
    throw CommError(std::string(what) + " of " + std::to_string(n) + " elements: more than MPI's int count holds");
  return int(n);
}

}  // namespace

MpiWorld::MpiWorld(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned && comm != MPI_COMM_WORLD) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiWorld::~MpiWorld() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<World> MpiWorld::split(int colour, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm_, colour == kNoColour ? MPI_UNDEFINED : colour, key, &out);
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiWorld>(out, true);
}

std::unique_ptr<World> MpiWorld::split_host(int key) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &out);
  return std::make_unique<MpiWorld>(out, true);
}

void MpiWorld::all_gather(const void* mine, void* all, size_t bytes) {
  const int n = count_of(bytes, "all_gather");
  MPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_);
}

void MpiWorld::broadcast(void* buffer, size_t bytes, int root) {
  const int err = MPI_Bcast(buffer, count_of(bytes, "broadcast"), MPI_BYTE, root, comm_);
  if (err != MPI_SUCCESS)
    throw CommError("broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root) +
                    " failed (MPI error " + std::to_string(err) + ")");
}

void MpiWorld::all_reduce(const double* send, double* recv, size_t count, ReduceOp op) {
  MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, count_of(count, "all_reduce"), MPI_DOUBLE, op_of(op), comm_);
}

void MpiWorld::all_reduce(const float* send, float* recv, size_t count, ReduceOp op) {
  MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, count_of(count, "all_reduce"), MPI_FLOAT, op_of(op), comm_);
}

void MpiWorld::send(const void* buffer, size_t bytes, int peer) {
  MPI_Send(buffer, count_of(bytes, "send"), MPI_BYTE, peer, 0, comm_);
}

void MpiWorld::recv(void* buffer, size_t bytes, int peer) {
  MPI_Recv(buffer, count_of(bytes, "recv"), MPI_BYTE, peer, 0, comm_, MPI_STATUS_IGNORE);
}

void MpiWorld::barrier() { MPI_Barrier(comm_); }

void MpiWorld::sleeping_barrier() { comm::sleeping_barrier(comm_); }

void MpiWorld::abort(int code) {
  MPI_Abort(comm_, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] true if it did
}

std::unique_ptr<Communicator> MpiWorld::communicator(const std::string& name, std::vector<int> world_ranks,
                                                     std::shared_ptr<CommContext> context) {
  if (comm_ == MPI_COMM_WORLD) {
    auto world = MpiCommunicator::world(std::move(context));
    return world;
  }
  MPI_Comm dup;
  MPI_Comm_dup(comm_, &dup);
  return std::make_unique<MpiCommunicator>(dup, name, std::move(world_ranks), std::move(context));
}

}  // namespace trident::comm
