// The rotary embedding's frequencies: theta^(-2i/hd) for pair i of a head of hd values (Meta's
// Llama), rewritten by Llama 3.1's long-context scaling where the model has it (Hugging Face's
// rope_scaling {rope_type "llama3"}, _compute_llama3_parameters): with wavelength w = 2 pi / f,
//   w < L / high_freq_factor          f                 (high frequencies kept)
//   w > L / low_freq_factor           f / factor        (low frequencies stretched)
//   otherwise                         (1 - s) f / factor + s f,  s = (L / w - low) / (high - low)
// (L = original_max_position_embeddings); or by YaRN (DeepSeek-V3, GPT-OSS; HF's
// _compute_yarn_parameters): f / factor (interpolation) and f (extrapolation) blended by the
// linear ramp r = clamp((i - ramp_low) / (ramp_high - ramp_low), 0, 1) as (f / factor) r + f (1 - r),
// the ramp's ends found on the host (core/rope_scaling.h). `attention` multiplies cos and sin (YaRN's
// attention factor; 1 otherwise), so the rotation's backward (inverse) is scaled by it too.
// One definition for the CPU and CUDA kernels.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define TRIDENT_HD __host__ __device__
#else
#define TRIDENT_HD
#endif

namespace trident::kernels {

struct RopeFreq {
  float theta = 10000.0f;
  bool llama3 = false;  // Llama 3.1's scaling (the fields below); false: theta alone
  float factor = 1.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f, original_max_position = 8192.0f;
  bool yarn = false;  // YaRN (factor and the ramp's ends)
  double ramp_low = 0.0, ramp_high = 1.0;  // double: GPT-OSS's unrounded ends, exact on the host
  float attention = 1.0f;  // multiplies cos and sin
};

// Frequency of pair i of a head of hd values (radians per position), in double on the host and
// in float on the device.
template <typename F>
TRIDENT_HD inline F rope_inv_freq(const RopeFreq& r, int i, int hd) {
  const F f = pow(F(r.theta), F(-2) * F(i) / F(hd));
  if (r.yarn) {
    F ramp = (F(i) - F(r.ramp_low)) / (F(r.ramp_high) - F(r.ramp_low));
    ramp = ramp < F(0) ? F(0) : (ramp > F(1) ? F(1) : ramp);
    return f / F(r.factor) * ramp + f * (F(1) - ramp);
  }
  if (!r.llama3) return f;
  const F pi = F(3.14159265358979323846), L = F(r.original_max_position);
  const F wavelen = F(2) * pi / f;
  if (wavelen < L / F(r.high_freq_factor)) return f;
  if (wavelen > L / F(r.low_freq_factor)) return f / F(r.factor);
  const F s = (L / wavelen - F(r.low_freq_factor)) / (F(r.high_freq_factor) - F(r.low_freq_factor));
  return (F(1) - s) * f / F(r.factor) + s * f;
}

}  // namespace trident::kernels

#undef TRIDENT_HD
