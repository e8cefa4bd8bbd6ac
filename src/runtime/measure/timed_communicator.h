// TimedCommunicator: forwards every call to another Communicator and adds the wall time spent
// in it to a counter. The trainer wraps the TP group with it, so the rehearsal report can say
// how much of the forward/backward time GptStage spent in its TP collectives, and the EP group,
// whose all-to-alls it records (entry and exit of each call) so the trainer can split them into
// the collective's own time and the wait for the slower peers.
#pragma once

#include <vector>

#include "runtime/comm/communicator.h"

namespace trident::measure {

// Steady-clock seconds: the clock all_to_all_spans() reads.
double steady_seconds();

class TimedCommunicator final : public comm::Communicator {
 public:
  explicit TimedCommunicator(comm::Communicator& inner) : inner_(inner) {}
  double seconds() const { return seconds_; }
  int64_t calls() const { return calls_; }
  double bytes() const { return bytes_; }
  void reset() { seconds_ = 0, calls_ = 0, bytes_ = 0, spans_.clear(); }
  // Each all-to-all since reset(): its entry and exit, steady-clock seconds, two per call.
  const std::vector<double>& all_to_all_spans() const { return spans_; }

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
  std::vector<double> spans_;
};

// Of rank `me`'s all-to-alls, the seconds it waited for its peers. spans holds every rank's
// all_to_all_spans() on one clock, rank after rank, the same calls each. A call's own time is
// from the last rank's entry to the last rank's exit (the collective with everyone present, what
// the planner predicts); what a rank's call takes beyond it is waiting for the late peers.
double all_to_all_wait_seconds(const std::vector<double>& spans, int ranks, int me);

}  // namespace trident::measure
