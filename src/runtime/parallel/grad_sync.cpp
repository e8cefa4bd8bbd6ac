#include "runtime/parallel/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trident::parallel {

GradSync::GradSync(comm::Communicator& dp, const nn::ParamLayout& layout, int zero, int64_t bucket_floats,
                   kernels::Kernels& k, comm::Communicator* experts)
    : dp_(dp), experts_(experts), k_(k), zero_(zero), total_(layout.total()), ready_from_(layout.total()) {
  if (experts_) expert_ranges_ = layout.expert_ranges();
  // Cut points: layer boundaries, plus the start and end of the buffer. Walk from the end and
  // close a bucket as soon as it holds bucket_floats.
  std::vector<int64_t> cuts{0, total_};
  for (int64_t i = 0; i < layout.num_layers(); ++i) {
    cuts.push_back(layout.layer(i).begin);
    cuts.push_back(layout.layer(i).end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  int64_t end = total_;
  for (int64_t i = int64_t(cuts.size()) - 2; i >= 0; --i) {
    if (end - cuts[i] >= bucket_floats || i == 0) {
      if (end > cuts[i]) buckets_.push_back({cuts[i], end, {}, false});
      end = cuts[i];
    }
  }
  std::reverse(buckets_.begin(), buckets_.end());

  if (sharded() && zero_ == 1) {
    std::vector<std::vector<GroupRanges>> per_bucket;
    for (const Bucket& b : buckets_) per_bucket.push_back(spaces(b.begin, b.end));
    zero1_ = std::make_unique<Zero1Shards>(std::move(per_bucket), k_);
    pieces_ = zero1_->pieces();
    shard_floats_ = zero1_->shard_floats();
  } else if (sharded() && zero_ >= 2) {
    units_ = std::make_unique<ZeroShards>(spaces(0, total_), layout, zero_, k_);
    pieces_ = units_->pieces();
    shard_floats_ = units_->shard_floats();
  } else {
    pieces_ = {{0, total_, 0}};
    shard_floats_ = total_;
  }
}

// The ZeRO spaces of [begin, end): all of it over dp, or its dense ranges over dp and its
// experts' over EDP.
std::vector<GroupRanges> GradSync::spaces(int64_t begin, int64_t end) const {
  if (expert_ranges_.empty()) return {{&dp_, {{begin, end}}}};
  GroupRanges dense{&dp_, {}}, experts{experts_, {}};
  int64_t at = begin;
  for (const auto& e : expert_ranges_) {
    const int64_t lo = std::max(e.begin, begin), hi = std::min(e.end, end);
    if (hi <= lo) continue;
    if (lo > at) dense.ranges.push_back({at, lo});
    experts.ranges.push_back({lo, hi});
    at = hi;
  }
  if (end > at) dense.ranges.push_back({at, end});
  return {dense, experts};
}

float* GradSync::piece_grads(float* stage_grads, const ShardPiece& p) {
  return units_ ? units_->grad_shard() + p.shard : stage_grads + p.begin;
}

float* GradSync::piece_params(float* stage_params, const ShardPiece& p) {
  return units_ && zero_ >= 3 ? units_->param_shard() + p.shard : stage_params + p.begin;
}

float* GradSync::grads_at(float* stage_grads, int64_t offset) {
  return units_ ? units_->deferred_grads(offset) : stage_grads + offset;
}

void GradSync::add_bytes(ModelStateBytes& b) const {
  if (zero1_) zero1_->add_bytes(b);
  if (units_) units_->add_bytes(b);
}

void GradSync::scatter_from_host(const float* whole, float* owned) {
  if (units_) return units_->scatter_from_host(whole, owned);
  if (zero1_) return zero1_->scatter_from_host(whole, owned);
  k_.from_host(owned, whole, size_t(total_));
}

size_t GradSync::launched_buckets() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += b.launched ? 1 : 0;
  return n;
}

void GradSync::start_step() {
  for (auto& b : buckets_) b.requests.clear(), b.launched = false;
  ready_from_ = total_;
  if (units_) units_->start_step();
}

void GradSync::hold_until_finish(int64_t begin, int64_t end) {
  for (auto& b : buckets_)
    if (b.begin < end && begin < b.end) b.held = true;
}

void GradSync::mark_ready(float* grads, int64_t begin, int64_t end) {
  if (units_) return units_->mark_ready(begin);
  if (dp_.size() == 1) return;
  ready_from_ = std::min(ready_from_, begin);
  advance(grads, false);
}

// Starts every final bucket not yet started (held ones only when finishing) and lets the
// started ones progress.
void GradSync::advance(float* grads, bool finishing) {
  for (size_t i = buckets_.size(); i-- > 0;) {
    Bucket& b = buckets_[i];
    if (b.begin < ready_from_) break;
    if (b.held && !finishing) continue;
    if (!b.launched) launch(i, grads);
    else if (zero1_) zero1_->progress(i);  // MPI progresses non-blocking collectives only inside MPI calls
    else for (auto& r : b.requests) r->test();
  }
}

// A bucket's reductions. ZeRO-1: its reduce-scatters. Plain DP: its all-reduces, the dense parts
// over dp, the experts' parts over EDP (none when EDP is one rank: each expert then lives on one
// rank of the pair).
void GradSync::launch(size_t index, float* grads) {
  Bucket& b = buckets_[index];
  b.launched = true;
  if (zero1_) return zero1_->start(index, grads);
  auto reduce = [&](comm::Communicator& group, int64_t lo, int64_t hi) {
    if (hi > lo && group.size() > 1)
      b.requests.push_back(group.all_reduce_async(grads + lo, hi - lo, comm::DType::F32, comm::ReduceOp::Sum));
  };
  int64_t at = b.begin;
  for (const auto& e : expert_ranges_) {
    const int64_t lo = std::max(e.begin, b.begin), hi = std::min(e.end, b.end);
    if (hi <= lo) continue;
    reduce(dp_, at, lo);
    reduce(*experts_, lo, hi);
    at = hi;
  }
  reduce(dp_, at, b.end);
}

void GradSync::finish(float* grads) {
  if (dp_.size() == 1) return;
  if (units_) return units_->finish();
  if (zero1_) {
    for (auto& b : buckets_) b.launched = true;
    return zero1_->reduce(grads);
  }
  ready_from_ = 0;
  advance(grads, true);
  for (auto& b : buckets_)
    for (auto& r : b.requests) r->wait();
}

void GradSync::all_gather_params(float* params) {
  if (!sharded() || zero_ >= 3) return;  // ZeRO-3 gathers each unit when it is used
  if (units_) return units_->gather_params(params);
  zero1_->gather_params(params);
}

void GradSync::start_param_gather(float* params) {
  if (zero1_) zero1_->start_gather(params);
}

std::vector<nn::ParamLayout::Unit> GradSync::wait_params(float* params, int64_t begin, int64_t end) {
  std::vector<nn::ParamLayout::Unit> done;
  if (!gathering_params()) return done;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < buckets_.size(); ++i)
    if (buckets_[i].begin < end && begin < buckets_[i].end && zero1_->finish_gather(i, params))
      done.push_back({buckets_[i].begin, buckets_[i].end});
  param_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return done;
}

std::vector<nn::ParamLayout::Unit> GradSync::complete_params(float* params) { return wait_params(params, 0, total_); }

std::vector<float> GradSync::gather_to_host(const float* owned) {
  if (units_) return units_->gather_to_host(owned);
  if (zero1_) return zero1_->gather_to_host(owned, total_);
  std::vector<float> out(static_cast<size_t>(total_));
  k_.to_host(out.data(), owned, out.size());
  return out;
}

}  // namespace trident::parallel
