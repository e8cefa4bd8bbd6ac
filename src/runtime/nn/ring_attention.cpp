#include "runtime/nn/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <utility>

namespace trident::nn {

namespace {
using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }
constexpr int kTagKv = 1, kTagDkv = 2;
constexpr int64_t kPieces = 4;

// op on the pair in pieces of query rows, polling the messages in flight between pieces: MPI
// moves a message only inside its calls, so without the polls a CPU rank would move the next
// block only once it waits for it.
template <class Op>
void in_pieces(const kernels::Kernels::AttentionBlock& pair, std::initializer_list<comm::RequestPtr*> flying, Op&& op) {
  for (const auto& piece : query_pieces(pair, kPieces)) {
    op(piece);
    for (comm::RequestPtr* r : flying)
      if (*r) (*r)->test();
  }
}
}  // namespace

RingAttention::RingAttention(kernels::Kernels& k, comm::Communicator& cp, const ContextSplit& split, int64_t B,
                             int64_t nh, int64_t nkv, int64_t hd, kernels::DType dt)
    : k_(k), cp_(cp), split_(split), B_(B), nh_(nh), nkv_(nkv), hd_(hd), plan_(k) {
  const size_t block = size_t(B * split.local() * 2 * nkv * hd);
  size_t r[5];
  for (size_t& x : r) x = plan_.add("context-parallel ring buffers", dt, block);
  const size_t s = plan_.add_f32("context-parallel ring buffers", k.ring_attention_scratch_size(split.local(), hd));
  plan_.allocate();
  kv_[0] = plan_.tensor(r[0]), kv_[1] = plan_.tensor(r[1]);
  dkv_[0] = plan_.tensor(r[2]), dkv_[1] = plan_.tensor(r[3]);
  dkv_step_ = plan_.tensor(r[4]);
  scratch_ = plan_.f32(s);
}

void RingAttention::wait(comm::RequestPtr& r) {
  if (!r) return;
  const auto t0 = clock_type::now();
  r->wait();
  r.reset();
  wait_s_ += since(t0);
}

double RingAttention::probe_block_seconds(int reps) {
  const int P = cp_.size(), r = cp_.rank();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = clock_type::now();
    auto send = cp_.isend(kv_[0].data, kv_[0].count, kv_[0].dtype, (r + 1) % P, kTagKv);
    auto recv = cp_.irecv(kv_[1].data, kv_[1].count, kv_[1].dtype, (r + P - 1) % P, kTagKv);
    send->wait();
    recv->wait();
    best = std::min(best, since(t0));
  }
  return best;
}

void RingAttention::forward(const kernels::Tensor& out, float* lse, const kernels::Tensor& qkv,
                            const kernels::Kernels::AttentionMask& mask) {
  const int P = cp_.size(), r = cp_.rank(), next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t N = B_ * split_.local();
  k_.ring_kv_pack(kv_[0], qkv, N, nh_, nkv_, hd_);
  int cur = 0;
  for (int i = 0; i < P; ++i) {
    comm::RequestPtr send, recv;
    if (i + 1 < P) {  // the next block is on its way while this one is computed
      send = cp_.isend(kv_[cur].data, kv_[cur].count, kv_[cur].dtype, next, kTagKv), ++sent_;
      recv = cp_.irecv(kv_[1 - cur].data, kv_[1 - cur].count, kv_[1 - cur].dtype, prev, kTagKv);
    }
    const auto t0 = clock_type::now();
    in_pieces(block((r - i + P) % P, mask.window), {&send, &recv}, [&](const kernels::Kernels::AttentionBlock& b) {
      k_.attention_block_forward(out, lse, qkv, kv_[cur], b, i == 0, scratch_);
    });
    compute_s_ += since(t0);
    wait(send);
    wait(recv);
    cur = 1 - cur;
  }
  if (!mask.sinks.empty()) k_.attention_sink_merge(out, lse, mask.sinks, B_, split_.local(), nh_, hd_);
}

void RingAttention::backward(const kernels::Tensor& dqkv, const kernels::Tensor& dout, const kernels::Tensor& qkv,
                             const kernels::Tensor& out, const float* lse, const kernels::Kernels::AttentionMask& mask,
                             float* dsinks) {
  const int P = cp_.size(), r = cp_.rank(), next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t N = B_ * split_.local();
  auto zero = [&](const kernels::Tensor& t) { k_.zero(static_cast<float*>(t.data), (t.bytes() + 3) / 4); };
  zero(dqkv);  // the block ops add into the query slots
  if (!mask.sinks.empty() && dsinks)  // each row's sink once: this rank's rows
    k_.attention_sink_backward(dsinks, dout, out, lse, mask.sinks, B_, split_.local(), nh_, hd_);
  k_.ring_kv_pack(kv_[0], qkv, N, nh_, nkv_, hd_);
  int cur = 0;
  comm::RequestPtr dsend, drecv;
  for (int i = 0; i < P; ++i) {
    comm::RequestPtr send, recv;
    if (i + 1 < P) {
      send = cp_.isend(kv_[cur].data, kv_[cur].count, kv_[cur].dtype, next, kTagKv), ++sent_;
      recv = cp_.irecv(kv_[1 - cur].data, kv_[1 - cur].count, kv_[1 - cur].dtype, prev, kTagKv);
    }
    // The gradient of the block this step holds: this rank's share, added to what the ranks
    // before it in the ring sent along (received behind this step's compute).
    const kernels::Tensor acc = dkv_[i % 2];
    const kernels::Tensor mine = i == 0 ? acc : dkv_step_;
    zero(mine);
    const auto t0 = clock_type::now();
    in_pieces(block((r - i + P) % P, mask.window), {&send, &recv, &dsend, &drecv}, [&](const kernels::Kernels::AttentionBlock& b) {
      k_.attention_block_backward(dqkv, mine, dout, qkv, kv_[cur], out, lse, b, scratch_);
    });
    compute_s_ += since(t0);
    if (i > 0) {
      wait(drecv);
      k_.add_inplace(acc, mine);
    }
    wait(dsend);  // its buffer receives next
    dsend = cp_.isend(acc.data, acc.count, acc.dtype, next, kTagDkv), ++sent_;
    const kernels::Tensor in = dkv_[(i + 1) % 2];
    drecv = cp_.irecv(in.data, in.count, in.dtype, prev, kTagDkv);
    wait(send);
    wait(recv);
    cur = 1 - cur;
  }
  wait(dsend);
  wait(drecv);  // this rank's own keys' and values' gradient, complete
  k_.ring_kv_unpack(dqkv, dkv_[P % 2], N, nh_, nkv_, hd_);
}

}  // namespace trident::nn
