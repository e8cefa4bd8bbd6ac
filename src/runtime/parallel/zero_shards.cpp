#include "runtime/parallel/zero_shards.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trident::parallel {

ZeroShards::ZeroShards(const std::vector<GroupRanges>& spaces, const nn::ParamLayout& L, int zero,
                       kernels::Kernels& k)
    : k_(k), zero_(zero) {
  if (zero < 2) throw std::invalid_argument("ZeroShards: needs ZeRO 2 or 3");
  // A tied GPT embedding whose two copies sit on different stages (or chunks): the copy's unit
  // is summed with the other copy's before it is reduced.
  const bool tied_apart = L.head_wte >= 0 && L.head_wte != L.wte;
  const bool wte_apart = L.wte >= 0 && !L.shard().has_output && nn::embedding_copies(L.shard().model);
  for (const auto& u : L.units())
    add_unit(u, spaces, (tied_apart && L.head_wte >= u.begin && L.head_wte < u.end) ||
                            (wte_apart && L.wte >= u.begin && L.wte < u.end));
  grad_shard_ = DeviceBuffer(k_, size_t(shard_floats_));
  if (zero_ >= 3) param_shard_ = DeviceBuffer(k_, size_t(shard_floats_));
  active_.assign(units_.size(), -1);
  resident_.assign(units_.size(), -1);
  prefetching_.resize(units_.size());
  deferred_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].deferred) deferred_[u] = DeviceBuffer(k_, size_t(max_span_));
  if (zero_ == 2) {
    send_ = DeviceBuffer(k_, size_t(max_per_));
    gathered_ = DeviceBuffer(k_, size_t(max_padded_));
  }
}

// Cuts unit u where the spaces meet; each segment's pieces over its group, its shard slot.
void ZeroShards::add_unit(const nn::ParamLayout::Unit& u, const std::vector<GroupRanges>& spaces, bool deferred) {
  UnitInfo x;
  x.begin = u.begin, x.end = u.end, x.deferred = deferred, x.shard = shard_floats_;
  for (const GroupRanges& space : spaces)
    for (const auto& r : space.ranges) {
      const int64_t lo = std::max(r.begin, u.begin), hi = std::min(r.end, u.end);
      if (hi > lo) x.segs.push_back({lo, hi, 0, 0, 0, -1, space.group});
    }
  std::sort(x.segs.begin(), x.segs.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  int64_t span = x.end - x.begin, spill = 0;
  for (size_t i = 0; i < x.segs.size(); ++i) {
    Segment& g = x.segs[i];
    const int64_t n = g.group->size(), r = g.group->rank();
    g.per = (g.end - g.begin + n - 1) / n;
    g.shard = shard_floats_;
    const int64_t lo = std::min(g.end, g.begin + r * g.per), hi = std::min(g.end, g.begin + (r + 1) * g.per);
    g.valid = hi - lo;
    pieces_.push_back({lo, hi, g.shard});
    shard_floats_ += g.per;
    max_per_ = std::max(max_per_, g.per);
    max_padded_ = std::max(max_padded_, g.per * n);
    span = std::max(span, g.begin - x.begin + g.per * n);
    if (!g.exact() && i + 1 < x.segs.size()) g.spill = spill, spill += g.per * n;
  }
  for (Segment& g : x.segs)
    if (g.spill >= 0) g.spill += span;  // the spill area sits behind the unit's reach
  max_span_ = std::max(max_span_, span);
  max_gather_ = std::max(max_gather_, span + spill);
  max_unit_shard_ = std::max(max_unit_shard_, shard_floats_ - x.shard);
  units_.push_back(std::move(x));
}

float* ZeroShards::unit_grads(int64_t u) {
  const UnitInfo& x = units_[size_t(u)];
  if (x.deferred) return deferred_[size_t(u)].p;
  if (active_[size_t(u)] >= 0) return bufs_[size_t(active_[size_t(u)])].p;
  if (free_bufs_.empty() && !in_flight_.empty() && int(bufs_.size()) >= writing_ + kSpare) complete_oldest();
  if (free_bufs_.empty()) {
    bufs_.emplace_back(k_, size_t(max_span_));
    recvs_.emplace_back(k_, size_t(max_unit_shard_));
    free_bufs_.push_back(int(bufs_.size()) - 1);
    peak_bufs_ = std::max(peak_bufs_, bufs_.size());
  }
  const int b = free_bufs_.back();
  free_bufs_.pop_back();
  k_.zero(bufs_[size_t(b)].p, size_t(max_span_));  // the padding tail reduces to zeros
  active_[size_t(u)] = b;
  ++writing_;
  return bufs_[size_t(b)].p;
}

void ZeroShards::complete_oldest() {
  Reduction& r = in_flight_.front();
  for (auto& q : r.requests) q->wait();
  const UnitInfo& x = units_[size_t(r.unit)];
  for (const Segment& g : x.segs)
    if (g.valid > 0)
      k_.add_inplace(kernels::Tensor(grad_shard_.p + g.shard, size_t(g.valid)),
                     kernels::Tensor(recvs_[size_t(r.buf)].p + (g.shard - x.shard), size_t(g.valid)));
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
    Reduction red{b, u, {}};
    for (const Segment& g : x.segs)
      red.requests.push_back(g.group->reduce_scatter_async(bufs_[size_t(b)].p + (g.begin - x.begin),
                                                           recvs_[size_t(b)].p + (g.shard - x.shard), size_t(g.per),
                                                           comm::DType::F32, comm::ReduceOp::Sum));
    in_flight_.push_back(std::move(red));
    active_[size_t(u)] = -1;
    --writing_;
    ++counts_.reductions;
  }
  // MPI progresses non-blocking collectives only inside MPI calls; completed ones free their
  // buffers (oldest first, so every rank adds them to its shard in the same order).
  auto done = [](Reduction& r) {
    bool all = true;
    for (auto& q : r.requests) all = q->test() && all;  // test each: it progresses the others
    return all;
  };
  while (!in_flight_.empty() && done(in_flight_.front())) complete_oldest();
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
    // Nothing else reduces into a deferred unit's pieces: the results land in the shard directly.
    for (const Segment& g : x.segs)
      g.group->reduce_scatter(deferred_[u].p + (g.begin - x.begin), grad_shard_.p + g.shard, size_t(g.per),
                              comm::DType::F32, comm::ReduceOp::Sum);
  }
}

void ZeroShards::gather_params(float* params) {
  size_t i = 0;  // pieces_ holds the segments' pieces in order
  for (const UnitInfo& x : units_)
    for (const Segment& g : x.segs) {
      const ShardPiece& p = pieces_[i++];
      k_.zero(send_.p, size_t(g.per));
      if (p.end > p.begin) k_.copy(send_.p, params + p.begin, size_t(p.end - p.begin));
      // No padding: gather in place (the segment's reach is its own floats).
      g.group->all_gather(send_.p, g.exact() ? params + g.begin : gathered_.p, size_t(g.per), comm::DType::F32);
      if (!g.exact()) k_.copy(params + g.begin, gathered_.p, size_t(g.end - g.begin));
    }
}

int ZeroShards::take_gather_buffer() {
  if (free_gbufs_.empty()) {
    gbufs_.emplace_back(k_, size_t(max_gather_));
    free_gbufs_.push_back(int(gbufs_.size()) - 1);
    peak_gathered_ = std::max(peak_gathered_, gbufs_.size());
  }
  const int b = free_gbufs_.back();
  free_gbufs_.pop_back();
  return b;
}

// Starts the all-gathers of unit u's segments into `into` (a gather buffer): in place, or the
// spill area for a segment whose padding would overwrite the next one's.
std::vector<comm::RequestPtr> ZeroShards::gather_unit(int64_t u, float* into) {
  const UnitInfo& x = units_[size_t(u)];
  std::vector<comm::RequestPtr> out;
  for (const Segment& g : x.segs)
    out.push_back(g.group->all_gather_async(param_shard_.p + g.shard, into + (g.spill >= 0 ? g.spill : g.begin - x.begin),
                                            size_t(g.per), comm::DType::F32));
  return out;
}

void ZeroShards::finish_gather(int64_t u, bool place) {
  auto& pending = prefetching_[size_t(u)];
  if (pending.empty()) return;
  for (auto& q : pending) q->wait();
  pending.clear();
  if (!place) return;
  const UnitInfo& x = units_[size_t(u)];
  float* buf = gbufs_[size_t(resident_[size_t(u)])].p;
  for (const Segment& g : x.segs)
    if (g.spill >= 0) k_.copy(buf + (g.begin - x.begin), buf + g.spill, size_t(g.end - g.begin));
}

const float* ZeroShards::unit_weights(int64_t u) {
  if (zero_ < 3) throw std::logic_error("ZeroShards::unit_weights under ZeRO-2");
  const size_t su = size_t(u);
  if (u == current_) return gbufs_[size_t(resident_[su])].p;
  const auto t0 = std::chrono::steady_clock::now();
  if (resident_[su] < 0) {
    const int b = take_gather_buffer();
    resident_[su] = b;
    prefetching_[su] = gather_unit(u, gbufs_[size_t(b)].p);
    finish_gather(u, true);
    ++counts_.gathers;
  } else {
    ++counts_.prefetch_hits;
    finish_gather(u, true);
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
    finish_gather(int64_t(v), false);
    free_gbufs_.push_back(resident_[v]);
    resident_[v] = -1;
  }
  if (next >= 0 && resident_[size_t(next)] < 0) {
    const int b = take_gather_buffer();
    prefetching_[size_t(next)] = gather_unit(next, gbufs_[size_t(b)].p);
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
    finish_gather(int64_t(v), false);
    if (resident_[v] >= 0) free_gbufs_.push_back(resident_[v]), resident_[v] = -1;
  }
  current_ = -1;
  recording_ = false;
}

std::vector<float> ZeroShards::gather_to_host(const float* shard) {
  std::vector<float> out;
  for (const auto& x : units_) out.resize(size_t(std::max<int64_t>(int64_t(out.size()), x.end)));
  DeviceBuffer recv(k_, size_t(max_padded_));
  for (const auto& x : units_)
    for (const Segment& g : x.segs) {
      g.group->all_gather(shard + g.shard, recv.p, size_t(g.per), comm::DType::F32);
      k_.to_host(out.data() + g.begin, recv.p, size_t(g.end - g.begin));
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
