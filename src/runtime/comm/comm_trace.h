// CommContext: what every communicator of one process shares — the world rank, the current
// training step (for traces and timeout messages), the timeout, and whether to trace.
//
// One object per process, owned by whoever builds the process groups and handed to each
// communicator by shared_ptr: no global state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace trident::comm {

struct CommContext {
  int world_rank = 0;
  int64_t step = 0;           // set by the trainer at the start of each step
  double timeout_s = 300.0;   // a blocking wait longer than this throws CommTimeout
  bool trace = false;         // --trace-comm: log every send, receive and collective
  FILE* trace_out = stderr;
  std::mutex trace_mutex;

  // One line per operation: "[comm] step 3 rank 5 tp[1/2] all_reduce 4096 f32 sum".
  void log(const std::string& line);
};

// Thrown when an operation waited longer than the context's timeout. The message names this
// rank, the group, the operation, its size and the peer (for point-to-point).
class CommTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown when the MPI library reports an error (a peer died, a truncated message, ...).
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trident::comm
