// Causal self-attention on the CPU, computing only the causal part of each score matrix.
//
// For each (batch, head) the T query rows are cut into blocks of kBlock rows. Block r covers
// rows [r0, r1) and needs keys [0, r1) only, so its scores are a (r1-r0) x r1 product (sgemm);
// the half above the diagonal blocks is never computed nor stored. The block's softmax
// probabilities are kept, packed block after block, for the backward (no recomputation).
// (batch, head) pairs are spread over OpenMP threads; each calls sgemm single-threaded.
// GPT-OSS (ops.h's AttentionMask): a sliding window leaves a block's keys before
// r0 - window + 1 out of its products (their probabilities stay 0 in the packed rows); a sink
// adds exp(sink - m) to each row's denominator. Each row's log-sum-exp follows the packed
// probabilities, so the backward has the sink's probability exp(sink - lse) for its gradient.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/fast_math.h"

namespace trident::kernels {

namespace {
constexpr int64_t kBlock = 64;

// Floats of the packed causal probabilities of one (batch, head).
int64_t packed_size(int64_t T) {
  int64_t total = 0;
  for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
    const int64_t r1 = std::min(T, r0 + kBlock);
    total += (r1 - r0) * r1;
  }
  return total;
}

// The first key a query block [r0, ...) needs: r0 - window + 1 under a window.
int64_t first_key(int64_t r0, int64_t window) { return window > 0 ? std::max<int64_t>(0, r0 - window + 1) : 0; }
}  // namespace

size_t CpuKernels::attention_probs_size(int64_t B, int64_t T, int64_t nh) const {
  return size_t(B * nh * (packed_size(T) + T));  // the packed probabilities, then lse [B, nh, T]
}

size_t CpuKernels::attention_scratch_size(int64_t B, int64_t T, int64_t nh) const {
  return size_t(threads_) * size_t(kBlock * T);
}

void CpuKernels::attention_forward(const Tensor& out_t, float* probs, const Tensor& qkv_t, int64_t B, int64_t T,
                                   int64_t nh, int64_t hd, const AttentionMask& mask) {
  float* out = f32_data(out_t, "attention_forward", size_t(B * T * nh * hd));
  const float* qkv = f32_data(qkv_t, "attention_forward", size_t(B * T * 3 * nh * hd));
  const float* sinks = f32_data(mask.sinks, "attention_forward", mask.sinks.empty() ? 0 : size_t(nh));
  const int64_t C = nh * hd, ld = 3 * C, W = mask.window;
  const int64_t per_head = packed_size(T);
  float* lse_all = probs + B * nh * per_head;
  const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      const float* q = qkv + b * T * ld + h * hd;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* o = out + b * T * C + h * hd;
      float* p = probs + (b * nh + h) * per_head;
      float* lse = lse_all + (b * nh + h) * T;
      for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
        const int64_t r1 = std::min(T, r0 + kBlock), rows = r1 - r0, lo = first_key(r0, W);
        gemm_serial(Trans::N, Trans::T, rows, r1 - lo, hd, scale, q + r0 * ld, ld, k + lo * ld, ld, 0.0f, p + lo, r1);
        for (int64_t i = 0; i < rows; ++i) {
          float* row = p + i * r1;
          const int64_t valid = r0 + i + 1, from = first_key(r0 + i, W);  // keys from..r0+i
          float m = sinks ? sinks[h] : -INFINITY;
          for (int64_t j = from; j < valid; ++j) m = std::max(m, row[j]);
          float s = sinks ? fast_exp(sinks[h] - m) : 0.0f;
#pragma omp simd reduction(+ : s)
          for (int64_t j = from; j < valid; ++j) {
            const float e = fast_exp(row[j] - m);
            row[j] = e;
            s += e;
          }
          const float inv = 1.0f / s;
#pragma omp simd
          for (int64_t j = from; j < valid; ++j) row[j] *= inv;
          for (int64_t j = 0; j < from; ++j) row[j] = 0.0f;
          for (int64_t j = valid; j < r1; ++j) row[j] = 0.0f;
          lse[r0 + i] = m + std::log(s);
        }
        gemm_serial(Trans::N, Trans::N, rows, hd, r1 - lo, 1.0f, p + lo, r1, v + lo * ld, ld, 0.0f, o + r0 * C, C);
        p += rows * r1;
      }
    }
}

void CpuKernels::attention_backward(const Tensor& dqkv_t, float* scratch, const Tensor& dout_t, const Tensor& qkv_t,
                                    const float* probs, const Tensor& out_t, int64_t B, int64_t T, int64_t nh,
                                    int64_t hd, const AttentionMask& mask, float* dsinks) {
  float* dqkv = f32_data(dqkv_t, "attention_backward", size_t(B * T * 3 * nh * hd));
  const float* dout = f32_data(dout_t, "attention_backward", size_t(B * T * nh * hd));
  const float* qkv = f32_data(qkv_t, "attention_backward", size_t(B * T * 3 * nh * hd));
  const float* out = f32_data(out_t, "attention_backward", size_t(B * T * nh * hd));
  const float* sinks = f32_data(mask.sinks, "attention_backward", mask.sinks.empty() ? 0 : size_t(nh));
  const int64_t C = nh * hd, ld = 3 * C, W = mask.window;
  const int64_t per_head = packed_size(T);
  const float* lse_all = probs + B * nh * per_head;
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<double> dsink(size_t(B * nh), 0.0);  // per (b, h), summed over b in order below
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      float* ds = scratch + size_t(omp_get_thread_num()) * size_t(kBlock * T);
      const float* q = qkv + b * T * ld + h * hd;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + b * T * ld + h * hd;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* o = out + b * T * C + h * hd;
      const float* d_o = dout + b * T * C + h * hd;
      const float* lse = lse_all + (b * nh + h) * T;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < hd; ++c) dk[t * ld + c] = dv[t * ld + c] = 0.0f;
      const float* p = probs + (b * nh + h) * per_head;
      double sink_sum = 0.0;
      for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
        const int64_t r1 = std::min(T, r0 + kBlock), rows = r1 - r0, lo = first_key(r0, W), n = r1 - lo;
        // dV[lo:r1] += P^T dO ; dP = dO V^T
        gemm_serial(Trans::T, Trans::N, n, hd, rows, 1.0f, p + lo, r1, d_o + r0 * C, C, 1.0f, dv + lo * ld, ld);
        gemm_serial(Trans::N, Trans::T, rows, n, hd, 1.0f, d_o + r0 * C, C, v + lo * ld, ld, 0.0f, ds + lo, r1);
        // dS = P * (dP - rowsum(dO * O)) * scale; the sink's dS = p_sink (0 - rowsum(dO * O))
        for (int64_t i = 0; i < rows; ++i) {
          const float* oi = o + (r0 + i) * C;
          const float* doi = d_o + (r0 + i) * C;
          float dsum = 0.0f;
#pragma omp simd reduction(+ : dsum)
          for (int64_t c = 0; c < hd; ++c) dsum += oi[c] * doi[c];
          if (sinks) sink_sum -= double(std::exp(sinks[h] - lse[r0 + i])) * dsum;
          const float* pr = p + i * r1;
          float* dr = ds + i * r1;
          const int64_t valid = r0 + i + 1, from = first_key(r0 + i, W);
#pragma omp simd
          for (int64_t j = from; j < valid; ++j) dr[j] = pr[j] * (dr[j] - dsum) * scale;
          for (int64_t j = lo; j < from; ++j) dr[j] = 0.0f;
          for (int64_t j = valid; j < r1; ++j) dr[j] = 0.0f;
        }
        // dQ[r0:r1] = dS K[lo:r1] ; dK[lo:r1] += dS^T Q[r0:r1]
        gemm_serial(Trans::N, Trans::N, rows, hd, n, 1.0f, ds + lo, r1, k + lo * ld, ld, 0.0f, dq + r0 * ld, ld);
        gemm_serial(Trans::T, Trans::N, n, hd, rows, 1.0f, ds + lo, r1, q + r0 * ld, ld, 1.0f, dk + lo * ld, ld);
        p += rows * r1;
      }
      dsink[size_t(b * nh + h)] = sink_sum;
    }
  if (sinks && dsinks)
    for (int64_t h = 0; h < nh; ++h) {
      double s = 0.0;
      for (int64_t b = 0; b < B; ++b) s += dsink[size_t(b * nh + h)];
      dsinks[h] += float(s);
    }
}

}  // namespace trident::kernels
