// AdamW, clipping and the learning-rate schedule (see optimizer.h).
#include "runtime/engine/optimizer.h"

#include <algorithm>
#include <cmath>

namespace trident::engine {

double learning_rate(const AdamWConfig& c, int64_t step) {
  if (c.warmup_steps > 0 && step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  if (c.decay_steps <= c.warmup_steps || step >= c.decay_steps) return step >= c.decay_steps && c.decay_steps > 0 ? c.min_lr : c.lr;
  const double progress = double(step - c.warmup_steps) / double(c.decay_steps - c.warmup_steps);
  return c.min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (c.lr - c.min_lr);
}

double clip_scale(const AdamWConfig& c, double norm) {
  if (c.grad_clip <= 0.0 || !(norm > c.grad_clip)) return 1.0;
  return c.grad_clip / norm;
}

std::vector<Segment> optimizer_segments(const nn::ParamLayout& layout, int64_t begin, int64_t end) {
  if (end < 0) end = layout.total();
  std::vector<Segment> out;
  for (const nn::TensorView& t : layout.tensors()) {
    const int64_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size());
    if (hi <= lo) continue;
    if (!out.empty() && out.back().decay == t.decays() && out.back().offset + out.back().size == lo) {
      out.back().size += hi - lo;
    } else {
      out.push_back({lo, hi - lo, t.decays()});
    }
  }
  return out;
}

void adamw_update(kernels::Kernels& k, const std::vector<Segment>& segments, float* params, const float* grads,
                  float* m, float* v, const AdamWConfig& c, double lr, double grad_scale, int64_t t) {
  for (const Segment& s : segments)
    k.adamw(params + s.offset, grads + s.offset, m + s.offset, v + s.offset, size_t(s.size), float(lr),
            float(c.beta1), float(c.beta2), float(c.eps), s.decay ? float(c.weight_decay) : 0.0f, float(grad_scale),
            t);
}

}  // namespace trident::engine
