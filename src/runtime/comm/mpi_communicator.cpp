#include "runtime/comm/mpi_communicator.h"

#include <chrono>
#include <sstream>
#include <thread>

namespace trident::comm {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::BF16: return MPI_UINT16_T;  // moved, never reduced by MPI (no bf16 type in MPI 3)
    case DType::F16: return MPI_UINT16_T;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void sleeping_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

namespace {

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

// A non-blocking MPI operation completed by polling against the context's deadline. Polling
// yields the core between tests: CI oversubscribes 2 cores with up to 8 ranks.
class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request request, std::string description, CommContext& context, bool point_to_point)
      : request_(request), description_(std::move(description)), context_(context), p2p_(point_to_point) {}
  ~MpiRequest() override {
    // Abandoned after a timeout or an error: cancel a point-to-point transfer so MPI can
    // finalize; a collective cannot be cancelled, and the run is failing anyway.
    if (!done_ && p2p_ && request_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&request_);
      MPI_Request_free(&request_);
    }
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    int err = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS)
      throw CommError("rank " + std::to_string(context_.world_rank) + ": " + description_ + " failed: " +
                      mpi_error_text(err));
    done_ = flag != 0;
    return done_;
  }

  void wait() override {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration<double>(context_.timeout_s);
    // Yield (cheap, lets a rank sharing the core run) for the first milliseconds, then sleep
    // between polls so a long wait does not burn a core another rank needs.
    const auto busy_until = start + std::chrono::milliseconds(5);
    while (!test()) {
      if (clock::now() > deadline) {
        std::ostringstream msg;
        msg << "communication timeout: rank " << context_.world_rank << " waited " << context_.timeout_s
            << " s at step " << context_.step << " on " << description_
            << " (a peer is stuck, dead or running a different program; rerun with --trace-comm to see "
               "every rank's last operation)";
        throw CommTimeout(msg.str());
      }
      if (clock::now() < busy_until) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  MPI_Request request_;
  std::string description_;
  CommContext& context_;
  bool p2p_ = false;
  bool done_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks,
                                 std::shared_ptr<CommContext> context)
    : comm_(comm),
      owned_(comm != MPI_COMM_WORLD),
      name_(std::move(name)),
      world_ranks_(std::move(world_ranks)),
      context_(std::move(context)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(std::shared_ptr<CommContext> context) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> ranks(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, "world", ranks, std::move(context));
}

std::string MpiCommunicator::describe(const std::string& what) const {
  std::ostringstream s;
  s << name_ << "[" << rank_ << "/" << size_ << "] " << what;
  return s.str();
}

void MpiCommunicator::check(int err, const std::string& description) const {
  if (err != MPI_SUCCESS)
    throw CommError("rank " + std::to_string(context_->world_rank) + ": " + description + " failed: " +
                    mpi_error_text(err));
}

RequestPtr MpiCommunicator::make_request(MPI_Request request, std::string description, bool p2p) {
  return std::make_unique<MpiRequest>(request, std::move(description), *context_, p2p);
}

static std::string sized(const char* op, size_t count, DType type) {
  return std::string(op) + " " + std::to_string(count) + " " + dtype_name(type);
}

RequestPtr MpiCommunicator::all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) {
  std::string d = describe(sized("all_reduce", count, type) + " " + reduce_op_name(op) + " with world ranks " +
                           [&] {
                             std::string r;
                             for (int w : world_ranks_) r += (r.empty() ? "" : ",") + std::to_string(w);
                             return r;
                           }());
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), mpi_type(type), mpi_op(op), comm_, &req), d);
  return make_request(req, d);
}

RequestPtr MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                                 ReduceOp op) {
  std::string d = describe(sized("reduce_scatter", recv_count, type) + " per rank " + reduce_op_name(op));
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(recv_count), mpi_type(type), mpi_op(op), comm_, &req),
        d);
  return make_request(req, d);
}

RequestPtr MpiCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType type) {
  std::string d = describe(sized("all_gather", send_count, type) + " per rank");
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Iallgather(send, static_cast<int>(send_count), mpi_type(type), recv, static_cast<int>(send_count),
                       mpi_type(type), comm_, &req),
        d);
  return make_request(req, d);
}

RequestPtr MpiCommunicator::isend(const void* buffer, size_t count, DType type, int peer, int tag) {
  std::string d = describe(sized("send", count, type) + " to rank " + std::to_string(world_rank_of(peer)) +
                           " tag " + std::to_string(tag));
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Isend(buffer, static_cast<int>(count), mpi_type(type), peer, tag, comm_, &req), d);
  return make_request(req, d, true);
}

RequestPtr MpiCommunicator::irecv(void* buffer, size_t count, DType type, int peer, int tag) {
  std::string d = describe(sized("recv", count, type) + " from rank " + std::to_string(world_rank_of(peer)) +
                           " tag " + std::to_string(tag));
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Irecv(buffer, static_cast<int>(count), mpi_type(type), peer, tag, comm_, &req), d);
  return make_request(req, d, true);
}

void MpiCommunicator::all_reduce(void* buffer, size_t count, DType type, ReduceOp op) {
  if (size_ == 1) return;
  all_reduce_async(buffer, count, type, op)->wait();
}

void MpiCommunicator::all_reduce_f64(double* buffer, size_t count, ReduceOp op) {
  std::string d = describe("all_reduce " + std::to_string(count) + " f64 " + reduce_op_name(op));
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), MPI_DOUBLE, mpi_op(op), comm_, &req), d);
  make_request(req, d)->wait();
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) {
  reduce_scatter_async(send, recv, recv_count, type, op)->wait();
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType type) {
  all_gather_async(send, recv, send_count, type)->wait();
}

void MpiCommunicator::all_to_all_v(const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
                                   DType type) {
  const int n = size();
  const size_t ranks = static_cast<size_t>(n);
  std::vector<int> sc(ranks), sd(ranks), rc(ranks), rd(ranks);
  size_t so = 0, ro = 0;
  for (int p = 0; p < n; ++p) {
    if (so + send_counts[p] > size_t(INT32_MAX) || ro + recv_counts[p] > size_t(INT32_MAX))
      throw std::invalid_argument(describe("all_to_all_v") + ": more than 2^31 elements (MPI's int counts)");
    sc[size_t(p)] = int(send_counts[p]), sd[size_t(p)] = int(so), so += send_counts[p];
    rc[size_t(p)] = int(recv_counts[p]), rd[size_t(p)] = int(ro), ro += recv_counts[p];
  }
  std::string d = describe(sized("all_to_all_v", so, type) + " sent, " + std::to_string(ro) + " received");
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(type), recv, rc.data(), rd.data(), mpi_type(type), comm_,
                       &req),
        d);
  make_request(req, d)->wait();
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DType type, int root) {
  std::string d = describe(sized("broadcast", count, type) + " from rank " + std::to_string(world_rank_of(root)));
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Ibcast(buffer, static_cast<int>(count), mpi_type(type), root, comm_, &req), d);
  make_request(req, d)->wait();
}

void MpiCommunicator::barrier() {
  std::string d = describe("barrier");
  if (context_->trace) context_->log(d);
  MPI_Request req;
  check(MPI_Ibarrier(comm_, &req), d);
  make_request(req, d)->wait();
}

void MpiCommunicator::send(const void* buffer, size_t count, DType type, int peer, int tag) {
  isend(buffer, count, type, peer, tag)->wait();
}

void MpiCommunicator::recv(void* buffer, size_t count, DType type, int peer, int tag) {
  irecv(buffer, count, type, peer, tag)->wait();
}

}  // namespace trident::comm
