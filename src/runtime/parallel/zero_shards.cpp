#include "runtime/parallel/zero_shards.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trident::parallel {

ZeroShards::ZeroShards(comm::Communicator& dp, const nn::ParamLayout& L, int zero, kernels::Kernels& k)
    : dp_(dp), k_(k), zero_(zero) {
  if (zero < 2 || dp.size() < 2) throw std::invalid_argument("ZeroShards: needs ZeRO 2 or 3 and dp > 1");
  const int64_t n = dp.size(), r = dp.rank();
  // A tied GPT embedding whose two copies sit on different stages (or chunks): the copy's unit
  // is summed with the other copy's before it is reduced.
  const bool tied_apart = L.head_wte >= 0 && L.head_wte != L.wte;
  const bool wte_apart = L.wte >= 0 && L.head_wte < 0 && !L.shard().llama();
  for (const auto& u : L.units()) {
    UnitInfo x;
    x.begin = u.begin, x.end = u.end;
    x.per = (u.size() + n - 1) / n;
    x.shard = shard_floats_;
    x.deferred = (tied_apart && L.head_wte >= u.begin && L.head_wte < u.end) ||
                 (wte_apart && L.wte >= u.begin && L.wte < u.end);
    shard_floats_ += x.per;
    max_per_ = std::max(max_per_, x.per);
    pieces_.push_back({std::min(u.end, u.begin + r * x.per), std::min(u.end, u.begin + (r + 1) * x.per), x.shard});
    units_.push_back(x);
  }
  grad_shard_ = DeviceBuffer(k_, size_t(shard_floats_));
  if (zero_ >= 3) param_shard_ = DeviceBuffer(k_, size_t(shard_floats_));
  active_.assign(units_.size(), -1);
  resident_.assign(units_.size(), -1);
  prefetching_.resize(units_.size());
  deferred_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].deferred) deferred_[u] = DeviceBuffer(k_, size_t(units_[u].per * n));
  if (zero_ == 2) {
    send_ = DeviceBuffer(k_, size_t(max_per_));
    gathered_ = DeviceBuffer(k_, size_t(max_per_ * n));
  }
}

float* ZeroShards::unit_grads(int64_t u) {
  const UnitInfo& x = units_[size_t(u)];
  if (x.deferred) return deferred_[size_t(u)].p;
  if (active_[size_t(u)] >= 0) return bufs_[size_t(active_[size_t(u)])].p;
  const size_t padded = size_t(max_per_ * dp_.size());
  if (free_bufs_.empty() && !in_flight_.empty() && int(bufs_.size()) >= writing_ + kSpare) complete_oldest();
  if (free_bufs_.empty()) {
    bufs_.emplace_back(k_, padded);
    recvs_.emplace_back(k_, size_t(max_per_));
    free_bufs_.push_back(int(bufs_.size()) - 1);
    peak_bufs_ = std::max(peak_bufs_, bufs_.size());
  }
  const int b = free_bufs_.back();
  free_bufs_.pop_back();
  k_.zero(bufs_[size_t(b)].p, size_t(x.per * dp_.size()));  // the padding tail reduces to zeros
  active_[size_t(u)] = b;
  ++writing_;
  return bufs_[size_t(b)].p;
}

void ZeroShards::complete_oldest() {
  Reduction& r = in_flight_.front();
  r.request->wait();
  const UnitInfo& x = units_[size_t(r.unit)];
  k_.add_inplace(kernels::Tensor(grad_shard_.p + x.shard, size_t(x.per)),
                 kernels::Tensor(recvs_[size_t(r.buf)].p, size_t(x.per)));
  free_bufs_.push_back(r.buf);
  in_flight_.pop_front();
}

void ZeroShards::start_step() {
  k_.zero(grad_shard_.p, size_t(shard_floats_));
  for (auto& d : deferred_)
    if (d.p) k_.zero(d.p, d.n);
}

void ZeroShards::mark_ready(int64_t begin) {
  for (int64_t u = int64_t(units_.size()) - 1; u >= 0; --u) {
    const UnitInfo& x = units_[size_t(u)];
    const int b = active_[size_t(u)];
    if (b < 0 || x.begin < begin) continue;
    in_flight_.push_back({b, u, dp_.reduce_scatter_async(bufs_[size_t(b)].p, recvs_[size_t(b)].p, size_t(x.per),
                                                         comm::DType::F32, comm::ReduceOp::Sum)});
    active_[size_t(u)] = -1;
    --writing_;
    ++counts_.reductions;
  }
  // MPI progresses non-blocking collectives only inside MPI calls; completed ones free their
  // buffers (oldest first, so every rank adds them to its shard in the same order).
  while (!in_flight_.empty() && in_flight_.front().request->test()) complete_oldest();
}

float* ZeroShards::deferred_grads(int64_t offset) {
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].deferred && offset >= units_[u].begin && offset < units_[u].end)
      return deferred_[u].p + (offset - units_[u].begin);
  return nullptr;
}

void ZeroShards::finish() {
  mark_ready(0);
  while (!in_flight_.empty()) complete_oldest();
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitInfo& x = units_[u];
    if (!x.deferred) continue;
    // Nothing else reduces into a deferred unit's piece: the result lands in the shard directly.
    dp_.reduce_scatter(deferred_[u].p, grad_shard_.p + x.shard, size_t(x.per), comm::DType::F32, comm::ReduceOp::Sum);
  }
}

void ZeroShards::gather_params(float* params) {
  const int64_t n = dp_.size();
  for (size_t u = 0; u < units_.size(); ++u) {
    const UnitInfo& x = units_[u];
    const ShardPiece& p = pieces_[u];
    k_.zero(send_.p, size_t(x.per));
    if (p.end > p.begin) k_.copy(send_.p, params + p.begin, size_t(p.end - p.begin));
    const bool exact = x.per * n == x.end - x.begin;  // no padding: gather in place
    dp_.all_gather(send_.p, exact ? params + x.begin : gathered_.p, size_t(x.per), comm::DType::F32);
    if (!exact) k_.copy(params + x.begin, gathered_.p, size_t(x.end - x.begin));
  }
}

int ZeroShards::take_gather_buffer() {
  if (free_gbufs_.empty()) {
    gbufs_.emplace_back(k_, size_t(max_per_ * dp_.size()));
    free_gbufs_.push_back(int(gbufs_.size()) - 1);
    peak_gathered_ = std::max(peak_gathered_, gbufs_.size());
  }
  const int b = free_gbufs_.back();
  free_gbufs_.pop_back();
  return b;
}

const float* ZeroShards::unit_weights(int64_t u) {
  if (zero_ < 3) throw std::logic_error("ZeroShards::unit_weights under ZeRO-2");
  const size_t su = size_t(u);
  if (u == current_) return gbufs_[size_t(resident_[su])].p;
  const UnitInfo& x = units_[su];
  const auto t0 = std::chrono::steady_clock::now();
  if (resident_[su] < 0) {
    const int b = take_gather_buffer();
    dp_.all_gather(param_shard_.p + x.shard, gbufs_[size_t(b)].p, size_t(x.per), comm::DType::F32);
    resident_[su] = b;
    ++counts_.gathers;
  } else {
    ++counts_.prefetch_hits;
    if (prefetching_[su]) {
      prefetching_[su]->wait();
      prefetching_[su].reset();
    }
  }
  gather_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  current_ = u;
  // The unit this pass uses next, from the order recorded the first time it ran.
  int64_t next = -1;
  std::vector<int64_t>& order = order_[int(pass_)];
  if (recording_) {
    if (order.empty() || order.back() != u) order.push_back(u);
  } else {
    auto it = std::find(order.begin() + long(std::min(pos_, order.size())), order.end(), u);
    if (it != order.end()) pos_ = size_t(it - order.begin()) + 1;
    if (pos_ < order.size()) next = order[pos_];
  }
  for (size_t v = 0; v < units_.size(); ++v) {
    if (int64_t(v) == u || int64_t(v) == next || resident_[v] < 0) continue;
    if (prefetching_[v]) prefetching_[v]->wait(), prefetching_[v].reset();
    free_gbufs_.push_back(resident_[v]);
    resident_[v] = -1;
  }
  if (next >= 0 && resident_[size_t(next)] < 0) {
    const UnitInfo& y = units_[size_t(next)];
    const int b = take_gather_buffer();
    prefetching_[size_t(next)] =
        dp_.all_gather_async(param_shard_.p + y.shard, gbufs_[size_t(b)].p, size_t(y.per), comm::DType::F32);
    resident_[size_t(next)] = b;
    ++counts_.prefetches;
  }
  return gbufs_[size_t(resident_[su])].p;
}

void ZeroShards::begin_pass(Pass p) {
  pass_ = p;
  recording_ = order_[int(p)].empty();
  pos_ = 0;
  current_ = -1;
}

void ZeroShards::end_pass() {
  for (size_t v = 0; v < units_.size(); ++v) {
    if (prefetching_[v]) prefetching_[v]->wait(), prefetching_[v].reset();
    if (resident_[v] >= 0) free_gbufs_.push_back(resident_[v]), resident_[v] = -1;
  }
  current_ = -1;
  recording_ = false;
}

std::vector<float> ZeroShards::gather_to_host(const float* shard) {
  const int64_t n = dp_.size();
  std::vector<float> out;
  for (const auto& x : units_) out.resize(size_t(std::max<int64_t>(int64_t(out.size()), x.end)));
  DeviceBuffer recv(k_, size_t(max_per_ * n));
  for (const auto& x : units_) {
    dp_.all_gather(shard + x.shard, recv.p, size_t(x.per), comm::DType::F32);
    k_.to_host(out.data() + x.begin, recv.p, size_t(x.end - x.begin));
  }
  return out;
}

void ZeroShards::scatter_from_host(const float* whole, float* shard) {
  k_.zero(shard, size_t(shard_floats_));
  for (const auto& p : pieces_)
    if (p.end > p.begin) k_.from_host(shard + p.shard, whole + p.begin, size_t(p.end - p.begin));
}

void ZeroShards::add_bytes(ModelStateBytes& b) const {
  const double f = 4.0;
  b.gradients += f * double(grad_shard_.n);
  for (const auto& d : deferred_) b.gradients += f * double(d.n);
  for (size_t i = 0; i < bufs_.size(); ++i) b.grad_buffers += f * double(bufs_[i].n + recvs_[i].n);
  if (zero_ >= 3) b.weights += f * double(param_shard_.n);
  for (const auto& g : gbufs_) b.gathered += f * double(g.n);
  b.staging += f * double(send_.n + gathered_.n);
}

}  // namespace trident::parallel
