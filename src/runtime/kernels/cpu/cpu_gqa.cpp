// Grouped-query attention on the host: kv heads repeated into the attention's qkv layout, and
// the repeated heads' gradients summed back (in head order: deterministic).
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

void CpuKernels::gqa_expand(const Tensor& qkv_t, const Tensor& q_t, const Tensor& kv_t, int64_t N, int64_t nh,
                            int64_t nkv, int64_t hd) {
  float* qkv = f32_data(qkv_t, "gqa_expand", size_t(N * 3 * nh * hd));
  const float* q = f32_data(q_t, "gqa_expand", size_t(N * nh * hd));
  const float* kv = f32_data(kv_t, "gqa_expand", size_t(N * 2 * nkv * hd));
  const int64_t group = nh / nkv, A = nh * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = qkv + n * 3 * A;
    const float* k = kv + n * 2 * nkv * hd;
    for (int64_t d = 0; d < A; ++d) row[d] = q[n * A + d];
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t d = 0; d < hd; ++d) {
        row[A + h * hd + d] = k[(h / group) * hd + d];
        row[2 * A + h * hd + d] = k[(nkv + h / group) * hd + d];
      }
  }
}

void CpuKernels::gqa_reduce(const Tensor& dq_t, const Tensor& dkv_t, const Tensor& dqkv_t, int64_t N, int64_t nh,
                            int64_t nkv, int64_t hd) {
  float* dq = f32_data(dq_t, "gqa_reduce", size_t(N * nh * hd));
  float* dkv = f32_data(dkv_t, "gqa_reduce", size_t(N * 2 * nkv * hd));
  const float* dqkv = f32_data(dqkv_t, "gqa_reduce", size_t(N * 3 * nh * hd));
  const int64_t group = nh / nkv, A = nh * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = dqkv + n * 3 * A;
    float* dk = dkv + n * 2 * nkv * hd;
    for (int64_t d = 0; d < A; ++d) dq[n * A + d] = row[d];
    for (int64_t d = 0; d < 2 * nkv * hd; ++d) dk[d] = 0.0f;
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t d = 0; d < hd; ++d) {
        dk[(h / group) * hd + d] += row[A + h * hd + d];
        dk[(nkv + h / group) * hd + d] += row[2 * A + h * hd + d];
      }
  }
}

}  // namespace trident::kernels
