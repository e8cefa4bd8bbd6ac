// Embedding lookup/backward and softmax cross-entropy (vocabulary-slice aware).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/fast_math.h"

namespace trident::kernels {

void CpuKernels::embedding_forward(const Tensor& out_t, const int32_t* tokens, const Tensor& wte_t, int64_t N,
                                   int64_t C, int64_t v_offset, int64_t V_local) {
  float* out = f32_data(out_t, "embedding_forward", size_t(N * C));
  const float* wte = f32_data(wte_t, "embedding_forward", size_t(V_local * C));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const int64_t id = int64_t(tokens[i]) - v_offset;
    float* o = out + i * C;
    if (id >= 0 && id < V_local) {
      const float* w = wte + id * C;
      for (int64_t c = 0; c < C; ++c) o[c] = w[c];
    } else {
      for (int64_t c = 0; c < C; ++c) o[c] = 0.0f;
    }
  }
}

void CpuKernels::add_positions(const Tensor& out_t, const Tensor& wpe_t, int64_t B, int64_t T, int64_t C) {
  float* out = f32_data(out_t, "add_positions", size_t(B * T * C));
  const float* wpe = f32_data(wpe_t, "add_positions", size_t(T * C));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float* o = out + (b * T + t) * C;
      const float* p = wpe + t * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] += p[c];
    }
}

void CpuKernels::embedding_backward(float* dwte, const Tensor& dout_t, const int32_t* tokens, int64_t N, int64_t C,
                                    int64_t v_offset, int64_t V_local) {
  const float* dout = f32_data(dout_t, "embedding_backward", size_t(N * C));
  // Each thread owns a range of columns: no conflicts, tokens visited in order (deterministic).
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (C + nt - 1) / nt;
    chunk = (chunk + 15) / 16 * 16;
    const int64_t lo = std::min(C, t * chunk), hi = std::min(C, lo + chunk);
    for (int64_t i = 0; i < N; ++i) {
      const int64_t id = int64_t(tokens[i]) - v_offset;
      if (id < 0 || id >= V_local) continue;
      float* w = dwte + id * C;
      const float* d = dout + i * C;
      for (int64_t c = lo; c < hi; ++c) w[c] += d[c];
    }
  }
}

void CpuKernels::positions_backward(float* dwpe, const Tensor& dout_t, int64_t B, int64_t T, int64_t C) {
  const float* dout = f32_data(dout_t, "positions_backward", size_t(B * T * C));
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    float* w = dwpe + t * C;
    for (int64_t b = 0; b < B; ++b) {
      const float* d = dout + (b * T + t) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) w[c] += d[c];
    }
  }
}

void CpuKernels::xent_row_max(float* row_max, const Tensor& logits_t, int64_t N, int64_t V, int64_t V_valid) {
  const float* logits = f32_data(logits_t, "xent_row_max", size_t(N * V));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* l = logits + i * V;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < V_valid; ++j) m = std::max(m, l[j]);
    row_max[i] = m;
  }
}

void CpuKernels::xent_sumexp_target(float* sumexp, float* target_logit, const Tensor& logits_t, const float* row_max,
                                    const int32_t* targets, int64_t N, int64_t V, int64_t V_valid, int64_t v_offset) {
  const float* logits = f32_data(logits_t, "xent_sumexp_target", size_t(N * V));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float* l = logits + i * V;
    const float m = row_max[i];
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < V_valid; ++j) s += fast_exp(l[j] - m);
    sumexp[i] = s;
    const int64_t id = int64_t(targets[i]) - v_offset;
    target_logit[i] = (id >= 0 && id < V_valid) ? l[id] : 0.0f;
  }
}

void CpuKernels::xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                             int64_t N) {
  for (int64_t i = 0; i < N; ++i) losses[i] = std::log(sumexp[i]) + row_max[i] - target_logit[i];
}

void CpuKernels::xent_backward_inplace(const Tensor& logits_t, const float* row_max, const float* sumexp,
                                       const int32_t* targets, float dloss, int64_t N, int64_t V, int64_t V_valid,
                                       int64_t v_offset) {
  float* logits = f32_data(logits_t, "xent_backward_inplace", size_t(N * V));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    float* l = logits + i * V;
    const float m = row_max[i];
    const float k = dloss / sumexp[i];
#pragma omp simd
    for (int64_t j = 0; j < V_valid; ++j) l[j] = k * fast_exp(l[j] - m);
    for (int64_t j = V_valid; j < V; ++j) l[j] = 0.0f;  // vocabulary padding: no gradient
    const int64_t id = int64_t(targets[i]) - v_offset;
    if (id >= 0 && id < V_valid) l[id] -= dloss;
  }
}

}  // namespace trident::kernels
