// Mixture-of-experts row moves on the CPU (semantics in ops.h): one OpenMP thread per row, so
// every output row is written by one thread in a fixed order (deterministic).
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

void CpuKernels::gather_rows(const Tensor& dst_t, const Tensor& src_t, const int32_t* rows, const float* scale,
                             int64_t n, int64_t C) {
  float* dst = f32_data(dst_t, "gather_rows", size_t(n * C));
  const float* src = f32_data(src_t, "gather_rows");
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* s = src + int64_t(rows[i]) * C;
    const float a = scale ? scale[i] : 1.0f;
    float* d = dst + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) d[c] = a * s[c];
  }
}

void CpuKernels::combine_rows(const Tensor& out_t, const Tensor& src_t, const int32_t* pos, const float* w, int64_t N,
                              int64_t k, int64_t C) {
  float* out = f32_data(out_t, "combine_rows", size_t(N * C));
  const float* src = f32_data(src_t, "combine_rows");
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < N; ++t) {
    float* o = out + t * C;
    for (int64_t c = 0; c < C; ++c) o[c] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t p = pos[t * k + j];
      if (p < 0) continue;
      const float a = w ? w[t * k + j] : 1.0f;
      const float* s = src + int64_t(p) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] += a * s[c];
    }
  }
}

void CpuKernels::gather_row_dots(float* dots, const Tensor& a_t, const int32_t* rows, const Tensor& b_t, int64_t n,
                                 int64_t C) {
  const float* a = f32_data(a_t, "gather_row_dots");
  const float* b = f32_data(b_t, "gather_row_dots", size_t(n * C));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* x = a + int64_t(rows[i]) * C;
    const float* y = b + i * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += x[c] * y[c];
    dots[i] = s;
  }
}

}  // namespace trident::kernels
