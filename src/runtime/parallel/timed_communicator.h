// TimedCommunicator: forwards every call to another Communicator and adds the wall time spent
// in it to a counter. The trainer wraps the TP group with it, so the rehearsal report can say
// how much of the forward/backward time GptStage spent in its TP collectives, and the EP group,
// whose all-to-alls it splits into the wire time and the wait for the slower peers.
#pragma once

#include "runtime/comm/communicator.h"

namespace trident::parallel {

class TimedCommunicator final : public comm::Communicator {
 public:
  explicit TimedCommunicator(comm::Communicator& inner) : inner_(inner) {}
  double seconds() const { return seconds_; }
  int64_t calls() const { return calls_; }
  double bytes() const { return bytes_; }
  void reset() { seconds_ = 0, calls_ = 0, bytes_ = 0, wait_seconds_ = 0; }
  // An all-to-all moving at most `bytes` (sent or received) takes latency_s + bytes x
  // per_byte_s on the wire (measured at start-up); what a call takes beyond that is waiting for
  // its peers to arrive, summed in wait_seconds() (a part of seconds()). Unset: no wait split.
  void set_all_to_all_wire(double latency_s, double per_byte_s) { latency_s_ = latency_s, per_byte_s_ = per_byte_s; }
  double wait_seconds() const { return wait_seconds_; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  void all_reduce(void* b, size_t n, comm::DType t, comm::ReduceOp op) override;
  void reduce_scatter(const void* s, void* r, size_t n, comm::DType t, comm::ReduceOp op) override;
  void all_gather(const void* s, void* r, size_t n, comm::DType t) override;
  void broadcast(void* b, size_t n, comm::DType t, int root) override;
  void all_to_all_v(const void* s, const size_t* sc, void* r, const size_t* rc, comm::DType t) override;
  void barrier() override;
  void send(const void* b, size_t n, comm::DType t, int peer, int tag) override;
  void recv(void* b, size_t n, comm::DType t, int peer, int tag) override;
  comm::RequestPtr all_reduce_async(void* b, size_t n, comm::DType t, comm::ReduceOp op) override;
  comm::RequestPtr reduce_scatter_async(const void* s, void* r, size_t n, comm::DType t, comm::ReduceOp op) override;
  comm::RequestPtr all_gather_async(const void* s, void* r, size_t n, comm::DType t) override;
  comm::RequestPtr isend(const void* b, size_t n, comm::DType t, int peer, int tag) override;
  comm::RequestPtr irecv(void* b, size_t n, comm::DType t, int peer, int tag) override;

 private:
  template <class F>
  auto timed(size_t bytes, F&& f);
  comm::Communicator& inner_;
  double seconds_ = 0;
  int64_t calls_ = 0;
  double bytes_ = 0;
  double latency_s_ = -1, per_byte_s_ = 0;  // the all-to-all's wire model (-1: none)
  double wait_seconds_ = 0;
};

}  // namespace trident::parallel
