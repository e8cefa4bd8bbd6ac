// LayerNorm forward and backward over rows of C features (eps: the model's norm epsilon, biased variance).
// The weight/bias gradients are reduced per thread into private rows, then summed in thread
// order: deterministic for a given thread count.
#include <omp.h>

#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

void CpuKernels::layernorm_forward(const Tensor& out_t, float* mean, float* rstd, const Tensor& inp_t,
                                   const Tensor& weight_t, const Tensor& bias_t, int64_t N, int64_t C, float eps) {
  float* out = f32_data(out_t, "layernorm_forward", size_t(N * C));
  const float* inp = f32_data(inp_t, "layernorm_forward", size_t(N * C));
  const float* weight = f32_data(weight_t, "layernorm_forward", size_t(C));
  const float* bias = f32_data(bias_t, "layernorm_forward", size_t(C));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* x = inp + i * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += x[c];
    const float m = s / float(C);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    const float r = 1.0f / std::sqrt(v / float(C) + eps);
    float* o = out + i * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = r;
  }
}

void CpuKernels::layernorm_backward(const Tensor& dinp_t, float* dweight, float* dbias, const Tensor& dout_t,
                                    const Tensor& inp_t, const Tensor& weight_t, const float* mean, const float* rstd,
                                    int64_t N, int64_t C) {
  float* dinp = f32_data(dinp_t, "layernorm_backward", size_t(N * C));
  const float* dout = f32_data(dout_t, "layernorm_backward", size_t(N * C));
  const float* inp = f32_data(inp_t, "layernorm_backward", size_t(N * C));
  const float* weight = f32_data(weight_t, "layernorm_backward", size_t(C));
  const int nt = threads_;
  std::vector<float> partial(size_t(nt) * 2 * C, 0.0f);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    float* pw = partial.data() + size_t(t) * 2 * C;
    float* pb = pw + C;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* x = inp + i * C;
      const float* d = dout + i * C;
      const float m = mean[i], r = rstd[i];
      float sum_dn = 0.0f, sum_dn_n = 0.0f;
#pragma omp simd reduction(+ : sum_dn, sum_dn_n)
      for (int64_t c = 0; c < C; ++c) {
        const float n = (x[c] - m) * r;
        const float dn = weight[c] * d[c];
        sum_dn += dn;
        sum_dn_n += dn * n;
      }
      const float mdn = sum_dn / float(C), mdnn = sum_dn_n / float(C);
      float* di = dinp + i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float n = (x[c] - m) * r;
        di[c] += (weight[c] * d[c] - mdn - n * mdnn) * r;
        pw[c] += n * d[c];
        pb[c] += d[c];
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    const float* pw = partial.data() + size_t(t) * 2 * C;
    for (int64_t c = 0; c < C; ++c) {
      dweight[c] += pw[c];
      dbias[c] += pw[C + c];
    }
  }
}

}  // namespace trident::kernels
