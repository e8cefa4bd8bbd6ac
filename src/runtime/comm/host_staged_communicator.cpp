#include "runtime/comm/host_staged_communicator.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace trident::comm {

namespace {

float bf16_to_f32(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_bf16(float f) {  // round to nearest even, as __float2bfloat16
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return uint16_t((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// One staged operation: the host copy the inner communicator works on (fp32 for a bf16
// reduction), and how to deliver the result when it is complete.
struct Staging {
  std::vector<char> bytes;  // host copy in the buffer's own type
  std::vector<float> f32;   // bf16 reductions: the host copy widened to fp32
  bool widened = false;

  // Host copy of `count` elements of `type` at device pointer `src`; widened when `reduce` is
  // a bf16 reduction.
  void load(const HostStagedCommunicator::Copy& to_host, const void* src, size_t count, DType type, bool reduce) {
    bytes.resize(count * dtype_size(type));
    if (src && count) to_host(bytes.data(), src, bytes.size());
    widened = reduce && type == DType::BF16;
    if (widened) {
      f32.resize(count);
      const auto* h = reinterpret_cast<const uint16_t*>(bytes.data());
      for (size_t i = 0; i < count; ++i) f32[i] = bf16_to_f32(h[i]);
    }
  }
  void* data() { return widened ? static_cast<void*>(f32.data()) : static_cast<void*>(bytes.data()); }
  DType type(DType original) const { return widened ? DType::F32 : original; }
  // Writes the first `count` elements of the result to device pointer dst.
  void store(const HostStagedCommunicator::Copy& to_device, void* dst, size_t count, DType type) {
    if (widened) {
      auto* h = reinterpret_cast<uint16_t*>(bytes.data());
      for (size_t i = 0; i < count; ++i) h[i] = f32_to_bf16(f32[i]);
    }
    if (dst && count) to_device(dst, bytes.data(), count * dtype_size(type));
  }
};

// Completes the inner request, then delivers the staged result (once).
class StagedRequest final : public Request {
 public:
  StagedRequest(RequestPtr inner, std::function<void()> finish) : inner_(std::move(inner)), finish_(std::move(finish)) {}
  void wait() override {
    if (done_) return;
    inner_->wait();
    complete();
  }
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    complete();
    return true;
  }

 private:
  void complete() {
    done_ = true;
    if (finish_) finish_();
  }
  RequestPtr inner_;
  std::function<void()> finish_;
  bool done_ = false;
};

}  // namespace

HostStagedCommunicator::HostStagedCommunicator(std::unique_ptr<Communicator> inner, Copy to_host, Copy to_device)
    : inner_(std::move(inner)), to_host_(std::move(to_host)), to_device_(std::move(to_device)) {}

void HostStagedCommunicator::all_reduce(void* buffer, size_t count, DType type, ReduceOp op) {
  all_reduce_async(buffer, count, type, op)->wait();
}
void HostStagedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType type, ReduceOp op) {
  reduce_scatter_async(send, recv, recv_count, type, op)->wait();
}
void HostStagedCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType type) {
  all_gather_async(send, recv, send_count, type)->wait();
}
void HostStagedCommunicator::broadcast(void* buffer, size_t count, DType type, int root) {
  Staging s;
  s.load(to_host_, buffer, count, type, false);
  inner_->broadcast(s.data(), count, type, root);
  s.store(to_device_, buffer, count, type);
}
void HostStagedCommunicator::all_to_all_v(const void* send, const size_t* send_counts, void* recv,
                                          const size_t* recv_counts, DType type) {
  size_t sent = 0, received = 0;
  for (int p = 0; p < size(); ++p) sent += send_counts[p], received += recv_counts[p];
  Staging in, out;
  in.load(to_host_, send, sent, type, false);
  out.load(to_host_, nullptr, received, type, false);
  inner_->all_to_all_v(in.data(), send_counts, out.data(), recv_counts, type);
  out.store(to_device_, recv, received, type);
}
void HostStagedCommunicator::send(const void* buffer, size_t count, DType type, int peer, int tag) {
  isend(buffer, count, type, peer, tag)->wait();
}
void HostStagedCommunicator::recv(void* buffer, size_t count, DType type, int peer, int tag) {
  irecv(buffer, count, type, peer, tag)->wait();
}

RequestPtr HostStagedCommunicator::all_reduce_async(void* buffer, size_t count, DType type, ReduceOp op) {
  auto s = std::make_shared<Staging>();
  s->load(to_host_, buffer, count, type, true);
  RequestPtr inner = inner_->all_reduce_async(s->data(), count, s->type(type), op);
  return std::make_unique<StagedRequest>(std::move(inner),
                                         [this, s, buffer, count, type] { s->store(to_device_, buffer, count, type); });
}

RequestPtr HostStagedCommunicator::reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType type,
                                                        ReduceOp op) {
  auto in = std::make_shared<Staging>(), out = std::make_shared<Staging>();
  in->load(to_host_, send, recv_count * size_t(size()), type, true);
  out->load(to_host_, nullptr, recv_count, type, true);
  RequestPtr inner = inner_->reduce_scatter_async(in->data(), out->data(), recv_count, in->type(type), op);
  return std::make_unique<StagedRequest>(std::move(inner), [this, in, out, recv, recv_count, type] {
    out->store(to_device_, recv, recv_count, type);
  });
}

RequestPtr HostStagedCommunicator::all_gather_async(const void* send, void* recv, size_t send_count, DType type) {
  auto in = std::make_shared<Staging>(), out = std::make_shared<Staging>();
  in->load(to_host_, send, send_count, type, false);
  const size_t total = send_count * size_t(size());
  out->load(to_host_, nullptr, total, type, false);
  RequestPtr inner = inner_->all_gather_async(in->data(), out->data(), send_count, type);
  return std::make_unique<StagedRequest>(std::move(inner),
                                         [this, in, out, recv, total, type] { out->store(to_device_, recv, total, type); });
}

RequestPtr HostStagedCommunicator::isend(const void* buffer, size_t count, DType type, int peer, int tag) {
  auto s = std::make_shared<Staging>();
  s->load(to_host_, buffer, count, type, false);
  RequestPtr inner = inner_->isend(s->data(), count, type, peer, tag);
  return std::make_unique<StagedRequest>(std::move(inner), [s] {});  // keeps the host copy alive
}

RequestPtr HostStagedCommunicator::irecv(void* buffer, size_t count, DType type, int peer, int tag) {
  auto s = std::make_shared<Staging>();
  s->load(to_host_, nullptr, count, type, false);
  RequestPtr inner = inner_->irecv(s->data(), count, type, peer, tag);
  return std::make_unique<StagedRequest>(std::move(inner),
                                         [this, s, buffer, count, type] { s->store(to_device_, buffer, count, type); });
}

}  // namespace trident::comm
