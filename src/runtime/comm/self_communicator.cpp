#include "runtime/comm/self_communicator.h"

#include <cstring>
#include <stdexcept>

namespace trident::comm {

namespace {
class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};
void copy(const void* send, void* recv, size_t count, DType type) {
  if (send != recv && count > 0) std::memmove(recv, send, count * dtype_size(type));
}
}  // namespace

void SelfCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp) {
  copy(send, recv, recv_count, type);
}
void SelfCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType type) {
  copy(send, recv, send_count, type);
}
void SelfCommunicator::all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                                    DType type) {
  if (send_counts[0] != recv_counts[0])
    throw std::logic_error(name_ + "[0/1] all_to_all_v sends " + std::to_string(send_counts[0]) + " but receives " +
                           std::to_string(recv_counts[0]));
  copy(send, recv, send_counts[0], type);
}
void SelfCommunicator::send(const void*, size_t, DType, int peer, int) {
  throw std::logic_error(name_ + "[0/1] send to rank " + std::to_string(peer) + ": a group of one has no peer");
}
void SelfCommunicator::recv(void*, size_t, DType, int peer, int) {
  throw std::logic_error(name_ + "[0/1] recv from rank " + std::to_string(peer) + ": a group of one has no peer");
}
RequestPtr SelfCommunicator::all_reduce_async(void*, size_t, DType, ReduceOp) { return std::make_unique<DoneRequest>(); }
RequestPtr SelfCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                                  ReduceOp op) {
  reduce_scatter(send, recv, recv_count, type, op);
  return std::make_unique<DoneRequest>();
}
RequestPtr SelfCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType type) {
  all_gather(send, recv, send_count, type);
  return std::make_unique<DoneRequest>();
}
RequestPtr SelfCommunicator::isend(const void* buffer, size_t count, DType type, int peer, int tag) {
  send(buffer, count, type, peer, tag);
  return nullptr;
}
RequestPtr SelfCommunicator::irecv(void* buffer, size_t count, DType type, int peer, int tag) {
  recv(buffer, count, type, peer, tag);
  return nullptr;
}

}  // namespace trident::comm
