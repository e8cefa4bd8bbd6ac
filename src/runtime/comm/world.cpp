#include "runtime/comm/world.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "runtime/comm/mpi_communicator.h"
#include "runtime/comm/mpi_world.h"
#include "runtime/comm/self_communicator.h"

namespace trident::comm {

std::vector<std::string> all_gather_strings(World& world, const std::string& mine) {
  const size_t n = size_t(world.size());
  const uint64_t length = mine.size();
  std::vector<uint64_t> lengths(n);
  world.all_gather(&length, lengths.data(), sizeof length);
  const size_t longest = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(longest, '\0');
  std::string all(n * longest, '\0');
  if (longest > 0) world.all_gather(padded.data(), all.data(), longest);
  std::vector<std::string> out(n);
  for (size_t r = 0; r < n; ++r) out[r] = all.substr(r * longest, size_t(lengths[r]));
  return out;
}

std::unique_ptr<World> SelfWorld::split(int colour, int) {
  if (colour == kNoColour) return nullptr;
  return std::make_unique<SelfWorld>();
}

std::unique_ptr<World> SelfWorld::split_host(int) { return std::make_unique<SelfWorld>(); }

void SelfWorld::all_gather(const void* mine, void* all, size_t bytes) {
  if (bytes > 0 && mine != all) std::memmove(all, mine, bytes);
}

void SelfWorld::all_reduce(const double* send, double* recv, size_t count, ReduceOp) {
  if (count > 0 && send != recv) std::memmove(recv, send, count * sizeof(double));
}

void SelfWorld::all_reduce(const float* send, float* recv, size_t count, ReduceOp) {
  if (count > 0 && send != recv) std::memmove(recv, send, count * sizeof(float));
}

void SelfWorld::send(const void*, size_t, int peer) {
  throw std::logic_error("a world of one process has no rank " + std::to_string(peer) + " to send to");
}

void SelfWorld::recv(void*, size_t, int peer) {
  throw std::logic_error("a world of one process has no rank " + std::to_string(peer) + " to receive from");
}

void SelfWorld::abort(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

std::unique_ptr<Communicator> SelfWorld::communicator(const std::string& name, std::vector<int>,
                                                      std::shared_ptr<CommContext>) {
  return std::make_unique<SelfCommunicator>(name);
}

std::unique_ptr<World> open_mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  return std::make_unique<MpiWorld>(MPI_COMM_WORLD);
}

std::unique_ptr<World> open_world(bool mpi) {
  if (mpi) return open_mpi_world();
  return std::make_unique<SelfWorld>();
}

void close_world(std::unique_ptr<World> world) {
  const bool mpi = dynamic_cast<MpiWorld*>(world.get()) != nullptr;
  world.reset();
  if (mpi) MPI_Finalize();
}

void all_reduce_f64(Communicator& group, double* values, size_t count, ReduceOp op) {
  if (group.size() == 1 || count == 0) return;
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&group)) return mpi->all_reduce_f64(values, count, op);
  const size_t n = size_t(group.size());
  std::vector<double> all(n * count);
  group.all_gather(values, all.data(), count * sizeof(double), DType::U8);
  for (size_t i = 0; i < count; ++i) {
    double acc = all[i];
    for (size_t r = 1; r < n; ++r) {
      const double x = all[r * count + i];
      acc = op == ReduceOp::Sum ? acc + x : op == ReduceOp::Max ? std::max(acc, x) : std::min(acc, x);
    }
    values[i] = acc;
  }
}

}  // namespace trident::comm
