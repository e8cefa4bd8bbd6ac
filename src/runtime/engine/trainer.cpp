// Trainer (see trainer.h).
#include "runtime/engine/trainer.h"

#include <chrono>
#include <cmath>

namespace trident::engine {

Trainer::Trainer(kernels::Kernels& k, const ModelSpec& model, int64_t micro_batch, int64_t grad_accum,
                 AdamWConfig opt, kernels::DType compute)
    : k_(k),
      stage_(k, nn::Shard::whole(model), micro_batch, model.seq_len, nullptr, false, compute),
      acts_(stage_),
      grad_accum_(grad_accum),
      opt_(opt) {
  const auto n = size_t(stage_.layout().total());
  m_ = k_.alloc(n);
  v_ = k_.alloc(n);
  segments_ = optimizer_segments(stage_.layout());
  tokens_.resize(size_t(stage_.N()));
  targets_.resize(size_t(stage_.N()));
}

Trainer::~Trainer() {
  const auto n = size_t(stage_.layout().total());
  k_.free(m_, n);
  k_.free(v_, n);
}

StepResult Trainer::train_step(const BatchFn& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  StepResult r;
  stage_.zero_grads();
  const double tokens = double(stage_.N()) * double(grad_accum_);
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < grad_accum_; ++micro) {
    batch(step_, micro, tokens_.data(), targets_.data());
    stage_.forward(acts_, tokens_.data(), targets_.data());
    loss_sum += stage_.loss_sum(acts_);
    stage_.backward(acts_, tokens_.data(), targets_.data(), float(1.0 / tokens));
  }
  r.loss = loss_sum / tokens;
  r.grad_norm = std::sqrt(k_.sum_squares(stage_.grads(), size_t(stage_.layout().total())));
  r.lr = learning_rate(opt_, step_);
  const double scale = clip_scale(opt_, r.grad_norm);
  ++step_;
  adamw_update(k_, segments_, stage_.params(), stage_.grads(), m_, v_, opt_, r.lr, scale, step_);
  stage_.params_updated();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double Trainer::evaluate(const BatchFn& batch, int64_t batches) {
  double sum = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    batch(0, b, tokens_.data(), targets_.data());
    stage_.forward(acts_, tokens_.data(), targets_.data());
    sum += stage_.loss_sum(acts_);
  }
  return sum / (double(stage_.N()) * double(batches));
}

kernels::Tensor Trainer::forward_logits(const int32_t* tokens, const int32_t* targets) {
  stage_.forward(acts_, tokens, targets);
  return acts_.logits();
}

}  // namespace trident::engine
