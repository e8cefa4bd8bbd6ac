// Communicator: the one interface every collective and point-to-point transfer goes through.
//
// Implementations: MPI (CPU ranks, Debian's OpenMPI) and NCCL (GPU ranks). One Communicator
// object per process group (TP, PP, DP, ... built from the Mesh); no global process-group
// state. Buffers live where the implementation's device keeps memory: host memory for MPI,
// GPU memory for NCCL. Ranks are the group's own ranks (0 .. size()-1).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace trident::comm {

enum class DType { F32, BF16, F16, I32, I64, U8 };
enum class ReduceOp { Sum, Max, Min };

// Element size and short name ("f32") of a type; inline so every backend shares them without
// linking another backend's library.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 1;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
  }
  return "?";
}

// A handle on an operation in flight. wait() blocks until it is complete (or throws on a
// communication timeout naming the operation and the peer); test() polls.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};
using RequestPtr = std::unique_ptr<Request>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", "pp", "world", ... for traces and errors

  // Blocking collectives. all_reduce is in place; reduce_scatter leaves recv_count elements
  // (the rank's slice of send) on each rank; all_gather concatenates send_count elements
  // from every rank in rank order.
  virtual void all_reduce(void* buffer, size_t count, DType type, ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType type) = 0;
  virtual void broadcast(void* buffer, size_t count, DType type, int root) = 0;
  virtual void barrier() = 0;
  // All-to-all with variable counts (expert parallelism's dispatch and combine): send_counts[p]
  // elements go to rank p, taken consecutively from send in rank order; recv_counts[p] elements
  // from rank p land consecutively in recv in rank order (size() counts each; send and recv
  // must not overlap). recv_counts[p] must equal rank p's send_counts[rank()].
  virtual void all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                            DType type) = 0;

  // Point-to-point; peer is a rank of this group.
  virtual void send(const void* buffer, size_t count, DType type, int peer, int tag) = 0;
  virtual void recv(void* buffer, size_t count, DType type, int peer, int tag) = 0;

  // Non-blocking variants: the buffers must stay alive and untouched until wait() returns.
  virtual RequestPtr all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) = 0;
  virtual RequestPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                          ReduceOp op) = 0;
  virtual RequestPtr all_gather_async(const void* send, void* recv, size_t send_count, DType type) = 0;
  virtual RequestPtr isend(const void* buffer, size_t count, DType type, int peer, int tag) = 0;
  virtual RequestPtr irecv(void* buffer, size_t count, DType type, int peer, int tag) = 0;
};

}  // namespace trident::comm
