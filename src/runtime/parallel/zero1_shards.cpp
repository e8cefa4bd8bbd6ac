#include "runtime/parallel/zero1_shards.h"

#include <algorithm>
#include <stdexcept>

namespace trident::parallel {

Zero1Shards::Zero1Shards(std::vector<std::vector<GroupRanges>> buckets, kernels::Kernels& k) : k_(k) {
  for (size_t b = 0; b < buckets.size(); ++b) {
    first_.push_back(spaces_.size());
    for (GroupRanges& spec : buckets[b]) {
      Space s;
      s.group = spec.group;
      s.ranges = std::move(spec.ranges);
      for (const auto& r : s.ranges) s.size += r.size();
      if (s.size == 0) continue;
      const int64_t n = s.group->size(), rank = s.group->rank();
      s.per = (s.size + n - 1) / n;
      s.lo = std::min(s.size, rank * s.per);
      s.hi = std::min(s.size, (rank + 1) * s.per);
      s.shard = shard_floats_;
      shard_floats_ += s.hi - s.lo;
      // A group of one (e.g. the experts' when ep = dp x cp) has nothing to reduce or gather:
      // its gradients and weights are whole where they lie, and it needs no staging.
      if (n > 1) {
        s.packed = DeviceBuffer(k_, size_t(s.per * n));  // zeroed; the padding past size stays zero
        s.slice = DeviceBuffer(k_, size_t(s.per));
      }
      walk(s, s.lo, s.hi, [&](int64_t flat, int64_t at, int64_t m) { pieces_.push_back({flat, flat + m, s.shard + at - s.lo}); });
      spaces_.push_back(std::move(s));
    }
  }
  first_.push_back(spaces_.size());
}

Zero1Shards::~Zero1Shards() {
  for (Space& s : spaces_)
    for (comm::RequestPtr* r : {&s.reduction, &s.gather}) {
      if (!*r) continue;
      try {
        (*r)->wait();
      } catch (...) {  // a failing run (a peer gone, a timeout): nothing left to save
      }
    }
}

template <class F>
void Zero1Shards::walk(const Space& s, int64_t from, int64_t to, F&& f) {
  int64_t at = 0;
  for (const auto& r : s.ranges) {
    const int64_t lo = std::max(from, at), hi = std::min(to, at + r.size());
    if (hi > lo) f(r.begin + (lo - at), lo, hi - lo);
    at += r.size();
  }
}

void Zero1Shards::pack(Space& s, const float* flat) {
  walk(s, 0, s.size, [&](int64_t f, int64_t at, int64_t n) { k_.copy(s.packed.p + at, flat + f, size_t(n)); });
}

void Zero1Shards::unpack_all(Space& s, float* flat) {
  walk(s, 0, s.size, [&](int64_t f, int64_t at, int64_t n) { k_.copy(flat + f, s.packed.p + at, size_t(n)); });
}

void Zero1Shards::start(size_t bucket, const float* grads) {
  for (size_t i = first_[bucket]; i < first_[bucket + 1]; ++i) {
    Space& s = spaces_[i];
    if (s.reduction || alone(s)) continue;
    if (s.gather) throw std::logic_error("ZeRO-1: a bucket's gradients reduced before its weights were gathered");
    pack(s, grads);
    s.reduction = s.group->reduce_scatter_async(s.packed.p, s.slice.p, size_t(s.per), comm::DType::F32, comm::ReduceOp::Sum);
  }
}

void Zero1Shards::progress(size_t bucket) {
  for (size_t i = first_[bucket]; i < first_[bucket + 1]; ++i)
    if (spaces_[i].reduction) spaces_[i].reduction->test();
}

void Zero1Shards::reduce(float* grads) {
  // In bucket order, as every rank starts them: a collective's order must agree across ranks.
  for (size_t b = 0; b + 1 < first_.size(); ++b) start(b, grads);
  for (Space& s : spaces_) {
    if (alone(s)) continue;
    s.reduction->wait();
    s.reduction.reset();
    walk(s, s.lo, s.hi, [&](int64_t f, int64_t at, int64_t n) { k_.copy(grads + f, s.slice.p + (at - s.lo), size_t(n)); });
  }
}

void Zero1Shards::start_gather(const float* params) {
  for (Space& s : spaces_) {
    if (s.gather || alone(s)) continue;
    // The slice's tail past hi - lo stays zero (the padding's reduce-scatter result).
    walk(s, s.lo, s.hi, [&](int64_t f, int64_t at, int64_t n) { k_.copy(s.slice.p + (at - s.lo), params + f, size_t(n)); });
    s.gather = s.group->all_gather_async(s.slice.p, s.packed.p, size_t(s.per), comm::DType::F32);
    ++gathers_in_flight_;
  }
}

bool Zero1Shards::finish_gather(size_t bucket, float* params) {
  bool any = false;
  for (size_t i = first_[bucket]; i < first_[bucket + 1]; ++i) {
    Space& s = spaces_[i];
    if (!s.gather) continue;
    s.gather->wait();
    s.gather.reset();
    --gathers_in_flight_;
    unpack_all(s, params);
    any = true;
  }
  return any;
}

void Zero1Shards::gather_params(float* params) {
  start_gather(params);
  for (size_t b = 0; b + 1 < first_.size(); ++b) finish_gather(b, params);
}

std::vector<float> Zero1Shards::gather_to_host(const float* shard, int64_t total) {
  // The staging buffers are the weight gathers' too.
  if (gathering()) throw std::logic_error("ZeRO-1: a whole buffer gathered while the weights' all-gathers are in flight");
  std::vector<float> out(static_cast<size_t>(total), 0.0f);
  for (Space& s : spaces_) {
    if (alone(s)) {
      walk(s, 0, s.size, [&](int64_t f, int64_t at, int64_t n) { k_.to_host(out.data() + f, shard + s.shard + at, size_t(n)); });
      continue;
    }
    if (s.hi > s.lo) k_.copy(s.slice.p, shard + s.shard, size_t(s.hi - s.lo));
    s.group->all_gather(s.slice.p, s.packed.p, size_t(s.per), comm::DType::F32);
    walk(s, 0, s.size, [&](int64_t f, int64_t at, int64_t n) { k_.to_host(out.data() + f, s.packed.p + at, size_t(n)); });
  }
  return out;
}

void Zero1Shards::scatter_from_host(const float* whole, float* shard) {
  for (const ShardPiece& p : pieces_) k_.from_host(shard + p.shard, whole + p.begin, size_t(p.end - p.begin));
}

void Zero1Shards::add_bytes(ModelStateBytes& b) const {
  for (const Space& s : spaces_) b.staging += 4.0 * double(s.packed.n + s.slice.n);
}

}  // namespace trident::parallel
