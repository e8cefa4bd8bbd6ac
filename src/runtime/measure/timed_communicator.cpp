#include "runtime/measure/timed_communicator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trident::measure {

using comm::DType;
using comm::ReduceOp;
using comm::RequestPtr;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
auto TimedCommunicator::timed(size_t bytes, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Add {
    TimedCommunicator* self;
    std::chrono::steady_clock::time_point t0;
    size_t bytes;
    ~Add() {
      self->seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      self->calls_ += 1;
      self->bytes_ += double(bytes);
    }
  } add{this, t0, bytes};
  return f();
}

void TimedCommunicator::all_reduce(void* b, size_t n, DType t, ReduceOp op) {
  timed(n * comm::dtype_size(t), [&] { inner_.all_reduce(b, n, t, op); });
}
void TimedCommunicator::reduce_scatter(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  timed(n * comm::dtype_size(t) * size(), [&] { inner_.reduce_scatter(s, r, n, t, op); });
}
void TimedCommunicator::all_gather(const void* s, void* r, size_t n, DType t) {
  timed(n * comm::dtype_size(t) * size(), [&] { inner_.all_gather(s, r, n, t); });
}
void TimedCommunicator::all_to_all_v(const void* s, const size_t* sc, void* r, const size_t* rc, DType t) {
  size_t sent = 0;
  for (int p = 0; p < size(); ++p) sent += sc[p];
  spans_.push_back(steady_seconds());
  timed(sent * comm::dtype_size(t), [&] { inner_.all_to_all_v(s, sc, r, rc, t); });
  spans_.push_back(steady_seconds());
}

double all_to_all_wait_seconds(const std::vector<double>& spans, int ranks, int me) {
  if (ranks < 1 || me < 0 || me >= ranks || spans.size() % (2 * size_t(ranks)) != 0)
    throw std::logic_error("all_to_all_wait_seconds: spans are not the same calls on every rank");
  const size_t calls = spans.size() / 2 / size_t(ranks);
  auto at = [&](int r, size_t call, int end) { return spans[(size_t(r) * calls + call) * 2 + size_t(end)]; };
  double wait = 0;
  for (size_t i = 0; i < calls; ++i) {
    double last_in = at(0, i, 0), last_out = at(0, i, 1);
    for (int r = 1; r < ranks; ++r) last_in = std::max(last_in, at(r, i, 0)), last_out = std::max(last_out, at(r, i, 1));
    wait += std::max(0.0, (at(me, i, 1) - at(me, i, 0)) - std::max(0.0, last_out - last_in));
  }
  return wait;
}
void TimedCommunicator::broadcast(void* b, size_t n, DType t, int root) {
  timed(n * comm::dtype_size(t), [&] { inner_.broadcast(b, n, t, root); });
}
void TimedCommunicator::barrier() { timed(0, [&] { inner_.barrier(); }); }
void TimedCommunicator::send(const void* b, size_t n, DType t, int peer, int tag) {
  timed(n * comm::dtype_size(t), [&] { inner_.send(b, n, t, peer, tag); });
}
void TimedCommunicator::recv(void* b, size_t n, DType t, int peer, int tag) {
  timed(n * comm::dtype_size(t), [&] { inner_.recv(b, n, t, peer, tag); });
}
// Async calls time only their start; GptStage's TP collectives are blocking.
RequestPtr TimedCommunicator::all_reduce_async(void* b, size_t n, DType t, ReduceOp op) {
  return timed(n * comm::dtype_size(t), [&] { return inner_.all_reduce_async(b, n, t, op); });
}
RequestPtr TimedCommunicator::reduce_scatter_async(const void* s, void* r, size_t n, DType t, ReduceOp op) {
  return timed(n * comm::dtype_size(t) * size(), [&] { return inner_.reduce_scatter_async(s, r, n, t, op); });
}
RequestPtr TimedCommunicator::all_gather_async(const void* s, void* r, size_t n, DType t) {
  return timed(n * comm::dtype_size(t) * size(), [&] { return inner_.all_gather_async(s, r, n, t); });
}
RequestPtr TimedCommunicator::isend(const void* b, size_t n, DType t, int peer, int tag) {
  return timed(n * comm::dtype_size(t), [&] { return inner_.isend(b, n, t, peer, tag); });
}
RequestPtr TimedCommunicator::irecv(void* b, size_t n, DType t, int peer, int tag) {
  return timed(n * comm::dtype_size(t), [&] { return inner_.irecv(b, n, t, peer, tag); });
}

}  // namespace trident::measure
