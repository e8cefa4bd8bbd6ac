// Host code only (the .cu suffix keeps this file out of the CPU-only trident_parallel glob, which
// collects runtime/comm/*.cpp; trident_cuda compiles it).
#include "runtime/cuda/nccl_communicator.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "runtime/cuda/cuda_check.h"

namespace trident::comm {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
  }
  throw std::invalid_argument("unknown DType");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  throw std::invalid_argument("unknown ReduceOp");
}

namespace {

// Completion of one NCCL operation: an event on the comm stream.
class NcclRequest final : public Request {
 public:
  NcclRequest(ncclComm_t comm, cudaEvent_t done, cudaStream_t compute, std::string description, double timeout_s)
      : comm_(comm), done_(done), compute_(compute), description_(std::move(description)), timeout_s_(timeout_s) {}
  ~NcclRequest() override { cudaEventDestroy(done_); }

  bool test() override {
    cudaError_t state = cudaEventQuery(done_);
    if (state == cudaSuccess) return true;
    if (state != cudaErrorNotReady) cudaCheck(state);
    ncclResult_t async_error = ncclSuccess;
    ncclCheck(ncclCommGetAsyncError(comm_, &async_error));
    if (async_error != ncclSuccess && async_error != ncclInProgress)
      throw cuda::CudaError(description_ + " failed: NCCL error " + std::to_string(int(async_error)) + " (" +
                            ncclGetErrorString(async_error) + ")");
    return false;
  }

  void wait() override {
    cudaCheck(cudaStreamWaitEvent(compute_, done_, 0));  // later compute sees the result
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    while (!test()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm_);
        throw cuda::CudaError("communication timeout after " + std::to_string(timeout_s_) + " s on " + description_ +
                              " (a peer is stuck, dead or running a different program); the NCCL communicator "
                              "was aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t done_;
  cudaStream_t compute_;
  std::string description_;
  double timeout_s_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(World& group, std::string name, cudaStream_t compute_stream, double timeout_s)
    : name_(std::move(name)), compute_stream_(compute_stream), timeout_s_(timeout_s) {
  rank_ = group.rank();
  size_ = group.size();
  ncclUniqueId id;
  if (rank_ == 0) ncclCheck(ncclGetUniqueId(&id));
  try {
    group.broadcast(&id, sizeof(id), 0);
  } catch (const CommError& e) {
    throw cuda::CudaError("the broadcast of the NCCL unique id for group " + name_ + " failed: " + e.what());
  }
  ncclCheck(ncclCommInitRank(&comm_, size_, id, rank_));
  cudaCheck(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  cudaCheck(cudaMalloc(&barrier_word_, sizeof(int)));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_stream_) cudaStreamSynchronize(comm_stream_);
  if (comm_) ncclCommDestroy(comm_);
  if (barrier_word_) cudaFree(barrier_word_);
  if (ready_) cudaEventDestroy(ready_);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
}

std::string NcclCommunicator::describe(const char* what, size_t count, DType type) const {
  return name_ + "[" + std::to_string(rank_) + "/" + std::to_string(size_) + "] " + what + " " +
         std::to_string(count) + " " + dtype_name(type);
}

void NcclCommunicator::begin() {
  cudaCheck(cudaEventRecord(ready_, compute_stream_));
  cudaCheck(cudaStreamWaitEvent(comm_stream_, ready_, 0));
}

RequestPtr NcclCommunicator::finish(std::string description) {
  cudaEvent_t done;
  cudaCheck(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  cudaCheck(cudaEventRecord(done, comm_stream_));
  return std::make_unique<NcclRequest>(comm_, done, compute_stream_, std::move(description), timeout_s_);
}

RequestPtr NcclCommunicator::all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) {
  begin();
  ncclCheck(ncclAllReduce(buffer, buffer, count, nccl_type(type), nccl_op(op), comm_, comm_stream_));
  return finish(describe("all_reduce", count, type));
}

RequestPtr NcclCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                                  ReduceOp op) {
  begin();
  ncclCheck(ncclReduceScatter(send, recv, recv_count, nccl_type(type), nccl_op(op), comm_, comm_stream_));
  return finish(describe("reduce_scatter", recv_count, type));
}

RequestPtr NcclCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType type) {
  begin();
  ncclCheck(ncclAllGather(send, recv, send_count, nccl_type(type), comm_, comm_stream_));
  return finish(describe("all_gather", send_count, type));
}

RequestPtr NcclCommunicator::isend(const void* buffer, size_t count, DType type, int peer, int tag) {
  begin();
  ncclCheck(ncclSend(buffer, count, nccl_type(type), peer, comm_, comm_stream_));
  return finish(describe("send", count, type) + " to " + std::to_string(peer));
}

RequestPtr NcclCommunicator::irecv(void* buffer, size_t count, DType type, int peer, int tag) {
  begin();
  ncclCheck(ncclRecv(buffer, count, nccl_type(type), peer, comm_, comm_stream_));
  return finish(describe("recv", count, type) + " from " + std::to_string(peer));
}

void NcclCommunicator::all_reduce(void* buffer, size_t count, DType type, ReduceOp op) {
  all_reduce_async(buffer, count, type, op)->wait();
}
void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) {
  reduce_scatter_async(send, recv, recv_count, type, op)->wait();
}
void NcclCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType type) {
  all_gather_async(send, recv, send_count, type)->wait();
}
// One grouped send/recv pair per peer (NCCL has no all-to-all of its own).
void NcclCommunicator::all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                                    DType type) {
  begin();
  const size_t bytes = dtype_size(type);
  size_t so = 0, ro = 0;
  ncclCheck(ncclGroupStart());
  for (int p = 0; p < size_; ++p) {
    if (send_counts[p])
      ncclCheck(ncclSend(static_cast<const char*>(send) + so * bytes, send_counts[p], nccl_type(type), p, comm_,
                         comm_stream_));
    if (recv_counts[p])
      ncclCheck(ncclRecv(static_cast<char*>(recv) + ro * bytes, recv_counts[p], nccl_type(type), p, comm_, comm_stream_));
    so += send_counts[p], ro += recv_counts[p];
  }
  ncclCheck(ncclGroupEnd());
  finish(describe("all_to_all_v", so, type) + " sent")->wait();
}

void NcclCommunicator::broadcast(void* buffer, size_t count, DType type, int root) {
  begin();
  ncclCheck(ncclBroadcast(buffer, buffer, count, nccl_type(type), root, comm_, comm_stream_));
  finish(describe("broadcast", count, type) + " from " + std::to_string(root))->wait();
}
void NcclCommunicator::barrier() { all_reduce(barrier_word_, 1, DType::I32, ReduceOp::Sum); }
void NcclCommunicator::send(const void* buffer, size_t count, DType type, int peer, int tag) {
  isend(buffer, count, type, peer, tag)->wait();
}
void NcclCommunicator::recv(void* buffer, size_t count, DType type, int peer, int tag) {
  irecv(buffer, count, type, peer, tag)->wait();
}

}  // namespace trident::comm
