// Branch-free exp and tanh that GCC vectorises (no libm call in the hot loops).
// exp: Cephes-style range reduction x = n ln2 + r, degree-6 polynomial; relative error < 2e-7
// for |x| < 87, clamped outside (exp(-inf) -> ~0).
#pragma once

#include <cstdint>
#include <cstring>

namespace trident::kernels {

inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): exact at the ends, no cancellation problem for GELU's use.
inline float fast_tanh(float u) { return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f); }

}  // namespace trident::kernels
