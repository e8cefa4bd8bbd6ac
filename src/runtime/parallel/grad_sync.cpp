#include "runtime/parallel/grad_sync.h"

#include <algorithm>

namespace trident::parallel {

GradSync::GradSync(comm::Communicator& dp, const nn::ParamLayout& layout, int zero, int64_t bucket_floats,
                   kernels::Kernels& k)
    : dp_(dp), k_(k), zero_(zero), total_(layout.total()), ready_from_(layout.total()) {
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
      if (end > cuts[i]) buckets_.push_back({cuts[i], end, nullptr, false});
      end = cuts[i];
    }
  }
  std::reverse(buckets_.begin(), buckets_.end());

  const int64_t n = dp.size();
  padded_ = (total_ + n - 1) / n * n;
  const int64_t per = padded_ / n;
  owned_begin_ = std::min(total_, dp.rank() * per);
  owned_end_ = std::min(total_, (dp.rank() + 1) * per);
  if (!sharded()) owned_begin_ = 0, owned_end_ = total_;
  if (sharded() && zero_ == 1) {
    scratch_ = DeviceBuffer(k_, size_t(padded_));  // zeroed; the tail past total_ stays zero
    slice_ = DeviceBuffer(k_, size_t(per));
  }
  if (sharded() && zero_ >= 2) {
    units_ = std::make_unique<ZeroShards>(dp, layout, zero_, k_);
    pieces_ = units_->pieces();
    shard_floats_ = units_->shard_floats();
  } else {
    pieces_ = {{owned_begin_, owned_end_, 0}};
    shard_floats_ = owned_end_ - owned_begin_;
  }
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
  b.staging += 4.0 * double(scratch_.n + slice_.n);
  if (units_) units_->add_bytes(b);
}

void GradSync::scatter_from_host(const float* whole, float* owned) {
  if (units_) return units_->scatter_from_host(whole, owned);
  if (owned_end_ > owned_begin_) k_.from_host(owned, whole + owned_begin_, size_t(owned_end_ - owned_begin_));
}

size_t GradSync::launched_buckets() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += b.launched ? 1 : 0;
  return n;
}

void GradSync::start_step() {
  for (auto& b : buckets_) b.request.reset(), b.launched = false;
  ready_from_ = total_;
  if (units_) units_->start_step();
}

void GradSync::mark_ready(float* grads, int64_t begin, int64_t end) {
  if (units_) return units_->mark_ready(begin);
  if (dp_.size() == 1 || sharded()) return;
  ready_from_ = std::min(ready_from_, begin);
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
    if (it->begin < ready_from_) break;
    if (it->launched) {
      it->request->test();  // MPI progresses non-blocking collectives only inside MPI calls
    } else {
      it->request = dp_.all_reduce_async(grads + it->begin, it->end - it->begin, comm::DType::F32, comm::ReduceOp::Sum);
      it->launched = true;
    }
  }
}

void GradSync::finish(float* grads) {
  if (dp_.size() == 1) return;
  if (units_) return units_->finish();
  if (sharded()) {
    k_.copy(scratch_.p, grads, size_t(total_));
    dp_.reduce_scatter(scratch_.p, slice_.p, slice_.n, comm::DType::F32, comm::ReduceOp::Sum);
    k_.copy(grads + owned_begin_, slice_.p, size_t(owned_end_ - owned_begin_));
    return;
  }
  mark_ready(grads, 0, total_);
  for (auto& b : buckets_) b.request->wait();
}

void GradSync::all_gather_params(float* params) {
  if (!sharded() || zero_ >= 3) return;  // ZeRO-3 gathers each unit when it is used
  if (units_) return units_->gather_params(params);
  k_.copy(slice_.p, params + owned_begin_, size_t(owned_end_ - owned_begin_));  // the slice's tail stays zero
  dp_.all_gather(slice_.p, scratch_.p, slice_.n, comm::DType::F32);
  k_.copy(params, scratch_.p, size_t(total_));
}

std::vector<float> GradSync::gather_to_host(const float* owned) {
  if (units_) return units_->gather_to_host(owned);
  std::vector<float> out(static_cast<size_t>(total_));
  if (!sharded()) {
    k_.to_host(out.data(), owned, out.size());
    return out;
  }
  k_.copy(slice_.p, owned, size_t(owned_end_ - owned_begin_));
  dp_.all_gather(slice_.p, scratch_.p, slice_.n, comm::DType::F32);
  k_.to_host(out.data(), scratch_.p, out.size());
  return out;
}

}  // namespace trident::parallel
