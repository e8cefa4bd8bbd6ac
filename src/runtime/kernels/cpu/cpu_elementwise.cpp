// Elementwise kernels: add, scale, GELU (tanh approximation, as GPT-2 and PyTorch's
// approximate="tanh").
#include <cmath>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/fast_math.h"

namespace trident::kernels {

namespace {
constexpr float kGeluA = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluB = 0.044715f;
}  // namespace

void CpuKernels::add(const Tensor& out_t, const Tensor& a_t, const Tensor& b_t) {
  const size_t n = out_t.count;
  float* out = f32_data(out_t, "add");
  const float* a = f32_data(a_t, "add", n);
  const float* b = f32_data(b_t, "add", n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) out[i] = a[i] + b[i];
}

void CpuKernels::add_inplace(const Tensor& out_t, const Tensor& a_t) {
  const size_t n = out_t.count;
  float* out = f32_data(out_t, "add_inplace");
  const float* a = f32_data(a_t, "add_inplace", n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) out[i] += a[i];
}

void CpuKernels::scale(float* x, float s, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) x[i] *= s;
}

void CpuKernels::gelu_forward(const Tensor& out_t, const Tensor& inp_t) {
  const size_t n = out_t.count;
  float* out = f32_data(out_t, "gelu_forward");
  const float* inp = f32_data(inp_t, "gelu_forward", n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) {
    const float x = inp[i];
    const float u = kGeluA * (x + kGeluB * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));
  }
}

void CpuKernels::gelu_backward(const Tensor& dinp_t, const Tensor& inp_t, const Tensor& dout_t) {
  const size_t n = dinp_t.count;
  float* dinp = f32_data(dinp_t, "gelu_backward");
  const float* inp = f32_data(inp_t, "gelu_backward", n);
  const float* dout = f32_data(dout_t, "gelu_backward", n);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) {
    const float x = inp[i];
    const float u = kGeluA * (x + kGeluB * x * x * x);
    const float th = fast_tanh(u);
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluA * (1.0f + 3.0f * kGeluB * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace trident::kernels
