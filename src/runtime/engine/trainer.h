// Trainer: one process, whole model. An optimizer step = grad_accum micro-batches of forward +
// backward (gradients accumulate in the flat buffer), then global-norm clipping and AdamW.
// The objective is the mean token loss over the global batch (each token weighs
// 1 / (micro_batch * T * grad_accum)).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/engine/optimizer.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"

namespace trident::engine {

struct StepResult {
  double loss = 0;       // mean token loss over the global batch
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
  double seconds = 0;
};

// Fills host buffers of micro_batch * T tokens and targets for micro-batch `micro` of `step`.
using BatchFn = std::function<void(int64_t step, int64_t micro, int32_t* tokens, int32_t* targets)>;

class Trainer {
 public:
  // compute: the model's compute dtype (F32, or BF16 mixed precision where k supports it).
  Trainer(kernels::Kernels& k, const ModelSpec& model, int64_t micro_batch, int64_t grad_accum, AdamWConfig opt,
          kernels::DType compute = kernels::DType::F32);
  ~Trainer();

  nn::GptStage& model() { return stage_; }
  const AdamWConfig& config() const { return opt_; }
  int64_t step() const { return step_; }  // optimizer steps done
  void set_step(int64_t s) { step_ = s; }
  int64_t activation_floats() const { return acts_.floats(); }
  float* m() { return m_; }
  float* v() { return v_; }

  void init(uint64_t seed) { stage_.init_params(seed); }
  StepResult train_step(const BatchFn& batch);
  // Mean loss over `batches` micro-batches, no gradient.
  double evaluate(const BatchFn& batch, int64_t batches);
  // Forward only on the given tokens (B*T); returns the logits buffer [B*T, V] (compute dtype).
  kernels::Tensor forward_logits(const int32_t* tokens, const int32_t* targets);

 private:
  kernels::Kernels& k_;
  nn::GptStage stage_;
  nn::Activations acts_;
  int64_t grad_accum_;
  AdamWConfig opt_;
  std::vector<Segment> segments_;
  float* m_ = nullptr;
  float* v_ = nullptr;
  int64_t step_ = 0;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace trident::engine
