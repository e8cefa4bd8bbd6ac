// Optimizer kernels: sum of squares (global gradient norm) and AdamW.
#include <omp.h>

#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

double CpuKernels::sum_squares(const float* x, size_t n) {
  // Per-thread partials summed in thread order: the same result every run.
  std::vector<double> partial(threads_, 0.0);
#pragma omp parallel num_threads(threads_)
  {
    double s = 0.0;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < int64_t(n); i += 1024) {
      const int64_t end = std::min<int64_t>(int64_t(n), i + 1024);
      float f = 0.0f;
#pragma omp simd reduction(+ : f)
      for (int64_t j = i; j < end; ++j) f += x[j] * x[j];
      s += f;
    }
    partial[omp_get_thread_num()] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void CpuKernels::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                       float beta2, float eps, float weight_decay, float grad_scale, int64_t t) {
  const float c1 = 1.0f / (1.0f - std::pow(beta1, float(t)));
  const float c2 = 1.0f / (1.0f - std::pow(beta2, float(t)));
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) {
    const float g = grad[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= lr * ((mi * c1) / (std::sqrt(vi * c2) + eps) + weight_decay * param[i]);
  }
}

}  // namespace trident::kernels
