// AdamW over flat buffers, global-norm clipping, and the learning-rate schedule.
//
// The optimizer works on segments of the flat parameter buffer (ParamLayout's tensors merged
// into runs with the same weight-decay flag), so a ZeRO-1 rank can run it on its own slice:
// pass the [begin, end) range it owns.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/ops.h"
#include "runtime/nn/param_layout.h"

namespace trident::engine {

struct AdamWConfig {
  double lr = 6e-4;          // peak learning rate
  double min_lr = 6e-5;      // end of the cosine decay
  int64_t warmup_steps = 0;  // linear warm-up from lr/warmup to lr
  int64_t decay_steps = 0;   // cosine from lr to min_lr over [warmup, decay_steps); min_lr after
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // decoupled; matrices and embeddings only
  double grad_clip = 1.0;     // max global gradient norm; <= 0 disables clipping
};

// Learning rate of optimizer step `step` (0-based).
double learning_rate(const AdamWConfig& c, int64_t step);
// Factor that brings the gradient to the clip norm: min(1, clip / norm).
double clip_scale(const AdamWConfig& c, double global_norm);

struct Segment {
  int64_t offset = 0, size = 0;
  bool decay = false;
};
// Segments of the flat buffer, clipped to [begin, end) (end < 0: the whole buffer).
std::vector<Segment> optimizer_segments(const nn::ParamLayout& layout, int64_t begin = 0, int64_t end = -1);

// One AdamW update of every segment; t is the 1-based step count; grad_scale applies clipping
// (and any 1/accumulation factor) on the fly.
void adamw_update(kernels::Kernels& k, const std::vector<Segment>& segments, float* params, const float* grads,
                  float* m, float* v, const AdamWConfig& c, double lr, double grad_scale, int64_t t);

}  // namespace trident::engine
