// Ring attention's block ops on the CPU (context parallel; see ops.h).
//
// Forward, per (batch, head) and per block of kBlock query rows: the scores against the block's
// keys (a causal pair computes only up to the diagonal), their softmax with its own max, the
// block's output P V, then the online-softmax merge with what out and lse hold:
//   lse' = log(exp(lse) + exp(lse_blk)),  out' = out exp(lse - lse') + O_blk exp(lse_blk - lse').
// Backward (FlashAttention's), per (batch, kv head) so the heads sharing a kv head add into its
// gradient in head order (deterministic, no races): P = exp(S - lse), dV += P^T dO,
// dS = P (dO V^T - rowsum(dO * O)) scale, dQ += dS K, dK += dS^T Q.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/fast_math.h"

namespace trident::kernels {

namespace {
constexpr int64_t kBlock = 64;

// Keys query row i (0-based in the pair) sees, and the key columns a query block of rows
// [i0, i0 + rows) needs.
int64_t keys_of(const Kernels::AttentionBlock& b, int64_t i) { return b.causal ? b.q0 + i - b.k0 + 1 : b.nk; }
// Under a sliding window: whether query row i of the pair sees key column j (by whole-sequence
// positions, so a window crossing a cp chunk boundary masks the same keys as one process).
bool in_window(const Kernels::AttentionBlock& b, int64_t i, int64_t j) {
  return b.window <= 0 || b.q_position(b.q0 + i) - b.k_position(b.k0 + j) < b.window;
}
int64_t cols_of(const Kernels::AttentionBlock& b, int64_t i0, int64_t rows) {
  return b.causal ? keys_of(b, i0 + rows - 1) : b.nk;
}

void check_block(const Kernels::AttentionBlock& b, const char* op) {
  if (b.q0 < 0 || b.k0 < 0 || b.nq < 0 || b.nk < 0 || b.q0 + b.nq > b.T || b.k0 + b.nk > b.T ||
      (b.causal && (b.k0 > b.q0 || b.q0 + b.nq > b.k0 + b.nk)) || b.nkv <= 0 || b.nh % b.nkv != 0)
    throw std::invalid_argument(std::string(op) + ": block rows outside the sequence, a causal pair whose keys "
                                "miss its queries' diagonal, or kv heads not dividing the heads");
}
}  // namespace

void CpuKernels::ring_kv_pack(const Tensor& kv_t, const Tensor& qkv_t, int64_t N, int64_t nh, int64_t nkv,
                              int64_t hd) {
  float* kv = f32_data(kv_t, "ring_kv_pack", size_t(N * 2 * nkv * hd));
  const float* qkv = f32_data(qkv_t, "ring_kv_pack", size_t(N * 3 * nh * hd));
  const int64_t A = nh * hd, g = nh / nkv;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < nkv; ++h) {
        const float* src = qkv + n * 3 * A + (1 + part) * A + h * g * hd;
        float* dst = kv + (n * 2 + part) * nkv * hd + h * hd;
        for (int64_t d = 0; d < hd; ++d) dst[d] = src[d];
      }
}

void CpuKernels::ring_kv_unpack(const Tensor& dqkv_t, const Tensor& dkv_t, int64_t N, int64_t nh, int64_t nkv,
                                int64_t hd) {
  float* dqkv = f32_data(dqkv_t, "ring_kv_unpack", size_t(N * 3 * nh * hd));
  const float* dkv = f32_data(dkv_t, "ring_kv_unpack", size_t(N * 2 * nkv * hd));
  const int64_t A = nh * hd, g = nh / nkv;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < nh; ++h) {
        float* dst = dqkv + n * 3 * A + (1 + part) * A + h * hd;
        const float* src = dkv + (n * 2 + part) * nkv * hd + (h / g) * hd;
        for (int64_t d = 0; d < hd; ++d) dst[d] = h % g == 0 ? src[d] : 0.0f;
      }
}

size_t CpuKernels::ring_attention_scratch_size(int64_t T, int64_t hd) const {
  return size_t(threads_) * size_t(kBlock * (2 * T + hd));
}

void CpuKernels::attention_block_forward(const Tensor& out_t, float* lse, const Tensor& qkv_t, const Tensor& kv_t,
                                         const AttentionBlock& blk, bool first, float* scratch) {
  check_block(blk, "attention_block_forward");
  const int64_t B = blk.B, T = blk.T, nh = blk.nh, nkv = blk.nkv, hd = blk.hd, C = nh * hd, g = nh / nkv;
  float* out = f32_data(out_t, "attention_block_forward", size_t(B * T * C));
  const float* qkv = f32_data(qkv_t, "attention_block_forward", size_t(B * T * 3 * C));
  const float* kv = f32_data(kv_t, "attention_block_forward", size_t(B * T * 2 * nkv * hd));
  const int64_t ldq = 3 * C, ldk = 2 * nkv * hd;
  const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      float* s = scratch + size_t(omp_get_thread_num()) * size_t(kBlock * (2 * T + hd));
      float* o_blk = s + kBlock * T;
      const float* q = qkv + (b * T + blk.q0) * ldq + h * hd;
      const float* k = kv + (b * T + blk.k0) * ldk + (h / g) * hd;
      const float* v = k + nkv * hd;
      float* o = out + (b * T + blk.q0) * C + h * hd;
      float* l = lse + (b * nh + h) * T + blk.q0;
      for (int64_t i0 = 0; i0 < blk.nq; i0 += kBlock) {
        const int64_t rows = std::min(kBlock, blk.nq - i0), cols = cols_of(blk, i0, rows);
        gemm_serial(Trans::N, Trans::T, rows, cols, hd, scale, q + i0 * ldq, ldq, k, ldk, 0.0f, s, cols);
        float row_max[kBlock], row_sum[kBlock];
        for (int64_t i = 0; i < rows; ++i) {
          float* row = s + i * cols;
          const int64_t valid = keys_of(blk, i0 + i);
          if (blk.window > 0)  // keys out of the window: no score (a whole row may go: lse -inf, merged as nothing)
            for (int64_t j = 0; j < valid; ++j)
              if (!in_window(blk, i0 + i, j)) row[j] = -INFINITY;
          float m = -INFINITY;
          for (int64_t j = 0; j < valid; ++j) m = std::max(m, row[j]);
          float sum = 0.0f;
          if (m == -INFINITY) {
            for (int64_t j = 0; j < cols; ++j) row[j] = 0.0f;
            row_max[i] = m, row_sum[i] = 0.0f;
            continue;
          }
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < valid; ++j) {
            const float e = fast_exp(row[j] - m);
            row[j] = e;
            sum += e;
          }
          for (int64_t j = valid; j < cols; ++j) row[j] = 0.0f;
          if (blk.window > 0)  // fast_exp(-inf) is ~1e-38, not 0
            for (int64_t j = 0; j < valid; ++j)
              if (!in_window(blk, i0 + i, j)) row[j] = 0.0f;
          row_max[i] = m, row_sum[i] = sum;
        }
        gemm_serial(Trans::N, Trans::N, rows, hd, cols, 1.0f, s, cols, v, ldk, 0.0f, o_blk, hd);
        for (int64_t i = 0; i < rows; ++i) {
          float* oi = o + (i0 + i) * C;
          const float* bi = o_blk + i * hd;
          // Every key of the block outside the row's window: nothing to merge (never the first
          // block, the rank's own, which holds each row's diagonal).
          if (row_sum[i] == 0.0f) continue;
          const float lse_blk = row_max[i] + std::log(row_sum[i]);
          float a = 0.0f, c = 1.0f / row_sum[i];  // out' = a out + c O_blk
          if (!first) {
            const float old = l[i0 + i], hi = std::max(old, lse_blk);
            const float merged = hi + std::log(std::exp(old - hi) + std::exp(lse_blk - hi));
            a = std::exp(old - merged);
            c = std::exp(row_max[i] - merged);
            l[i0 + i] = merged;
          } else {
            l[i0 + i] = lse_blk;
          }
#pragma omp simd
          for (int64_t d = 0; d < hd; ++d) oi[d] = a * oi[d] + c * bi[d];
        }
      }
    }
}

void CpuKernels::attention_block_backward(const Tensor& dqkv_t, const Tensor& dkv_t, const Tensor& dout_t,
                                          const Tensor& qkv_t, const Tensor& kv_t, const Tensor& out_t,
                                          const float* lse, const AttentionBlock& blk, float* scratch) {
  check_block(blk, "attention_block_backward");
  const int64_t B = blk.B, T = blk.T, nh = blk.nh, nkv = blk.nkv, hd = blk.hd, C = nh * hd, g = nh / nkv;
  float* dqkv = f32_data(dqkv_t, "attention_block_backward", size_t(B * T * 3 * C));
  float* dkv = f32_data(dkv_t, "attention_block_backward", size_t(B * T * 2 * nkv * hd));
  const float* dout = f32_data(dout_t, "attention_block_backward", size_t(B * T * C));
  const float* qkv = f32_data(qkv_t, "attention_block_backward", size_t(B * T * 3 * C));
  const float* kv = f32_data(kv_t, "attention_block_backward", size_t(B * T * 2 * nkv * hd));
  const float* out = f32_data(out_t, "attention_block_backward", size_t(B * T * C));
  const int64_t ldq = 3 * C, ldk = 2 * nkv * hd;
  const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t kh = 0; kh < nkv; ++kh) {
      float* p = scratch + size_t(omp_get_thread_num()) * size_t(kBlock * (2 * T + hd));
      float* dp = p + kBlock * T;
      const float* k = kv + (b * T + blk.k0) * ldk + kh * hd;
      const float* v = k + nkv * hd;
      float* dk = dkv + (b * T + blk.k0) * ldk + kh * hd;
      float* dv = dk + nkv * hd;
      for (int64_t h = kh * g; h < (kh + 1) * g; ++h) {
        const float* q = qkv + (b * T + blk.q0) * ldq + h * hd;
        float* dq = dqkv + (b * T + blk.q0) * ldq + h * hd;
        const float* o = out + (b * T + blk.q0) * C + h * hd;
        const float* d_o = dout + (b * T + blk.q0) * C + h * hd;
        const float* l = lse + (b * nh + h) * T + blk.q0;
        for (int64_t i0 = 0; i0 < blk.nq; i0 += kBlock) {
          const int64_t rows = std::min(kBlock, blk.nq - i0), cols = cols_of(blk, i0, rows);
          gemm_serial(Trans::N, Trans::T, rows, cols, hd, scale, q + i0 * ldq, ldq, k, ldk, 0.0f, p, cols);
          for (int64_t i = 0; i < rows; ++i) {
            float* row = p + i * cols;
            const int64_t valid = keys_of(blk, i0 + i);
            const float li = l[i0 + i];
#pragma omp simd
            for (int64_t j = 0; j < valid; ++j) row[j] = fast_exp(row[j] - li);
            for (int64_t j = valid; j < cols; ++j) row[j] = 0.0f;
            if (blk.window > 0)
              for (int64_t j = 0; j < valid; ++j)
                if (!in_window(blk, i0 + i, j)) row[j] = 0.0f;
          }
          // dV[0:cols] += P^T dO ; dP = dO V^T
          gemm_serial(Trans::T, Trans::N, cols, hd, rows, 1.0f, p, cols, d_o + i0 * C, C, 1.0f, dv, ldk);
          gemm_serial(Trans::N, Trans::T, rows, cols, hd, 1.0f, d_o + i0 * C, C, v, ldk, 0.0f, dp, cols);
          for (int64_t i = 0; i < rows; ++i) {
            const float* oi = o + (i0 + i) * C;
            const float* doi = d_o + (i0 + i) * C;
            float dsum = 0.0f;
#pragma omp simd reduction(+ : dsum)
            for (int64_t d = 0; d < hd; ++d) dsum += oi[d] * doi[d];
            const float* pr = p + i * cols;
            float* dr = dp + i * cols;
            const int64_t valid = keys_of(blk, i0 + i);
#pragma omp simd
            for (int64_t j = 0; j < valid; ++j) dr[j] = pr[j] * (dr[j] - dsum) * scale;
            for (int64_t j = valid; j < cols; ++j) dr[j] = 0.0f;
          }
          // dQ[rows] += dS K[0:cols] ; dK[0:cols] += dS^T Q[rows]
          gemm_serial(Trans::N, Trans::N, rows, hd, cols, 1.0f, dp, cols, k, ldk, 1.0f, dq + i0 * ldq, ldq);
          gemm_serial(Trans::T, Trans::N, cols, hd, rows, 1.0f, dp, cols, q + i0 * ldq, ldq, 1.0f, dk, ldk);
        }
      }
    }
}

void CpuKernels::attention_sink_merge(const Tensor& out_t, float* lse, const Tensor& sinks_t, int64_t B, int64_t T,
                                      int64_t nh, int64_t hd) {
  float* out = f32_data(out_t, "attention_sink_merge", size_t(B * T * nh * hd));
  const float* sinks = f32_data(sinks_t, "attention_sink_merge", size_t(nh));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t t = 0; t < T; ++t) {
        float& l = lse[(b * nh + h) * T + t];
        const float hi = std::max(l, sinks[h]);
        const float merged = hi + std::log(std::exp(l - hi) + std::exp(sinks[h] - hi));
        const float a = std::exp(l - merged);
        float* o = out + (b * T + t) * nh * hd + h * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] *= a;
        l = merged;
      }
}

void CpuKernels::attention_sink_backward(float* dsinks, const Tensor& dout_t, const Tensor& out_t, const float* lse,
                                         const Tensor& sinks_t, int64_t B, int64_t T, int64_t nh, int64_t hd) {
  const float* dout = f32_data(dout_t, "attention_sink_backward", size_t(B * T * nh * hd));
  const float* out = f32_data(out_t, "attention_sink_backward", size_t(B * T * nh * hd));
  const float* sinks = f32_data(sinks_t, "attention_sink_backward", size_t(nh));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < nh; ++h) {  // one head per thread: its rows summed in order
    double s = 0.0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const size_t at = size_t((b * T + t) * nh * hd + h * hd);
        float dsum = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dsum += out[at + size_t(d)] * dout[at + size_t(d)];
        s -= double(std::exp(sinks[h] - lse[(b * nh + h) * T + t])) * dsum;
      }
    dsinks[h] += float(s);
  }
}

}  // namespace trident::kernels
