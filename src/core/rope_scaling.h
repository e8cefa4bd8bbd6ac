// YaRN's numbers (Hugging Face's _compute_yarn_parameters in modeling_rope_utils.py, DeepSeek-V3's
// modeling_deepseek.py, Megatron-Core's YarnRotaryEmbedding), in double on the host: the one place
// the trainer, the config reader and the references' dump take them from. The rope kernels blend
// each pair's frequency with the ramp found here (runtime/kernels/rope_freq.h).
#pragma once

#include <algorithm>
#include <cmath>

#include "core/model_spec.h"

namespace trident::yarn {

// get_mscale / yarn_get_mscale: 0.1 mscale ln(scale) + 1, or 1 when nothing is stretched.
inline double get_mscale(double scale, double mscale = 1.0) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The attention factor that multiplies cos and sin: Hugging Face's rule (the ratio of the two
// mscales when both are given, else get_mscale(factor)); DeepSeek-V3's 1 / 1 gives 1.
inline double attention_factor(const RopeScaling& r) {
  if (r.mscale != 0 && r.mscale_all_dim != 0) return get_mscale(r.factor, r.mscale) / get_mscale(r.factor, r.mscale_all_dim);
  return get_mscale(r.factor);
}

// DeepSeek-V3's MLA softmax scale is multiplied by get_mscale(factor, mscale_all_dim)^2 where
// mscale_all_dim is given (HF's DeepseekV3Attention: self.scaling * mscale * mscale).
inline double softmax_multiplier(const RopeScaling& r) {
  if (r.type != "yarn" || r.mscale_all_dim == 0) return 1.0;
  const double m = get_mscale(r.factor, r.mscale_all_dim);
  return m * m;
}

// The ramp between extrapolation and interpolation over the dim / 2 pairs of a rotary part of dim
// features: find_correction_range(beta_fast, beta_slow, ...), floored / ceiled unless truncate is
// false (GPT-OSS), clamped to [0, dim - 1], and widened by 0.001 where it is empty (as HF's
// linear_ramp_factor does against the singularity).
struct Ramp {
  double low = 0, high = 0;
};
inline double correction_dim(double rotations, int dim, double base, double original_max_position) {
  return double(dim) * std::log(original_max_position / (rotations * 2 * 3.14159265358979323846)) / (2 * std::log(base));
}
inline Ramp ramp(const RopeScaling& r, double theta, int dim) {
  const double L = double(r.original_max_position);
  double low = correction_dim(r.beta_fast, dim, theta, L), high = correction_dim(r.beta_slow, dim, theta, L);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  Ramp out{std::max(low, 0.0), std::min(high, double(dim - 1))};
  if (out.low == out.high) out.high += 0.001;
  return out;
}

}  // namespace trident::yarn
