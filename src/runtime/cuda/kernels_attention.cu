// Fused causal self-attention, flash style (Dao et al. 2022) kept simple enough to review:
// scores are computed tile by tile in shared memory and never written to global memory.
//
// Forward and the dQ pass: a block of 8 warps handles 8 consecutive queries of one (batch,
// head); each warp owns one query row and walks the keys in tiles of 32 (one key per lane)
// with an online softmax. The dK/dV pass is the mirror: each warp owns one key and walks the
// queries at or after it. No atomics, so the backward pass is deterministic.
// Lane l owns output dimensions l, l+32, l+64, l+96 (HS <= 128, a multiple of 32).
// GPT-OSS: a sliding window (query t sees keys t - window < j <= t; the tiles wholly before a
// block's first window are skipped) and sinks (one logit per head joining each row's softmax
// denominator: merged into m and l after the keys, so the kept lse includes it and the backward's
// probabilities are right; the sinks' gradient -sum_t exp(sink - lse_t) delta_t is one more
// kernel, a block per head summing its rows in a fixed order).
#include <cmath>

#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels.h"

namespace trident::cuda {

namespace {

constexpr int kWarps = 8;   // rows (queries or keys) per block
constexpr int kTile = 32;   // columns (keys or queries) per tile, one per lane
constexpr int kMaxDims = 4; // HS / 32 at most

struct Geometry {
  int Tn, NH, HS, C;
  int window;  // 0: none
  size_t row;  // elements between consecutive tokens in qkv: 3C
  __device__ size_t q(int b, int t, int h) const { return (size_t(b) * Tn + t) * row + size_t(h) * HS; }
  __device__ size_t k(int b, int t, int h) const { return q(b, t, h) + C; }
  __device__ size_t v(int b, int t, int h) const { return q(b, t, h) + 2 * size_t(C); }
  __device__ size_t o(int b, int t, int h) const { return (size_t(b) * Tn + t) * C + size_t(h) * HS; }
  // Query t sees key j (j <= t assumed).
  __device__ bool in_window(int t, int j) const { return window <= 0 || t - j < window; }
  // The first key tile a block of queries from `first` needs.
  __device__ int first_tile(int first) const { return window <= 0 ? 0 : max(0, first - window + 1) / kTile * kTile; }
};

// Copies kTile rows starting at token t0 of q, k or v (offset 0, C or 2C) into tile[kTile][HS+1],
// times scale; rows past the sequence read as zero.
template <typename T>
__device__ void load_tile(float* tile, const T* src, const Geometry& g, int b, int h, int t0, int offset,
                          float scale) {
  const int ld = g.HS + 1;
  for (int i = threadIdx.x; i < kTile * g.HS; i += blockDim.x) {
    int j = i / g.HS, d = i % g.HS, t = t0 + j;
    tile[j * ld + d] = t < g.Tn ? to_f(src[g.q(b, t, h) + offset + d]) * scale : 0.0f;
  }
}

template <typename T>
__global__ void attention_forward_kernel(T* out, float* lse, const T* qkv, const T* sinks, Geometry g, float scale) {
  extern __shared__ float sm[];
  const int ld = g.HS + 1, nd = g.HS / 32;
  float* Ks = sm;
  float* Vs = Ks + kTile * ld;
  float* Qs = Vs + kTile * ld;  // [kWarps][HS], already scaled
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kWarps, t = first + warp;
  float* q = Qs + warp * g.HS;
  if (t < g.Tn)
    for (int d = lane; d < g.HS; d += 32) q[d] = to_f(qkv[g.q(b, t, h) + d]) * scale;

  float m = -INFINITY, l = 0.0f, acc[kMaxDims] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int last = min(first + kWarps, g.Tn) - 1;
  for (int k0 = g.first_tile(first); k0 <= last; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, qkv, g, b, h, k0, g.C, 1.0f);
    load_tile(Vs, qkv, g, b, h, k0, 2 * g.C, 1.0f);
    __syncthreads();
    if (t >= g.Tn || k0 > t) continue;
    const int key = k0 + lane;
    const bool seen = key <= t && g.in_window(t, key);
    float s = -INFINITY;
    if (seen) {
      s = 0.0f;
      for (int d = 0; d < g.HS; ++d) s += q[d] * Ks[lane * ld + d];
    }
    const float tile_max = warp_max(s);  // the same on every lane of the warp
    if (tile_max == -INFINITY) continue;  // the whole tile before this row's window
    const float m_new = fmaxf(m, tile_max);
    const float p = seen ? expf(s - m_new) : 0.0f;
    const float correction = expf(m - m_new);
    l = l * correction + warp_sum(p);
#pragma unroll
    for (int dd = 0; dd < kMaxDims; ++dd) acc[dd] *= correction;
    for (int j = 0; j < kTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
      for (int dd = 0; dd < kMaxDims; ++dd)
        if (dd < nd) acc[dd] += pj * Vs[j * ld + lane + 32 * dd];
    }
    m = m_new;
  }
  if (t >= g.Tn) return;
  if (sinks) {  // a key of logit sinks[h] and no value: in the max and the denominator only
    const float sink = to_f(sinks[h]), m_new = fmaxf(m, sink), correction = expf(m - m_new);
    l = l * correction + expf(sink - m_new);
    for (int dd = 0; dd < kMaxDims; ++dd) acc[dd] *= correction;
    m = m_new;
  }
  for (int dd = 0; dd < nd; ++dd) out[g.o(b, t, h) + lane + 32 * dd] = from_f<T>(acc[dd] / l);
  if (lane == 0) lse[(size_t(b) * g.NH + h) * g.Tn + t] = m + logf(l);
}

// dsinks[h] += -sum over the rows of (b, h) of exp(sink - lse) delta: one block per head, each
// thread a strided share of the rows, then a fixed-order tree (deterministic).
template <typename T>
__global__ void attention_sink_grad_kernel(float* dsinks, const float* delta, const float* lse, const T* sinks, int B,
                                           int Tn, int NH) {
  __shared__ float part[256];
  const int h = blockIdx.x;
  const float sink = to_f(sinks[h]);
  float acc = 0.0f;
  for (int i = threadIdx.x; i < B * Tn; i += blockDim.x) {
    const size_t at = (size_t(i / Tn) * NH + h) * Tn + i % Tn;
    acc -= expf(sink - lse[at]) * delta[at];
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) dsinks[h] += part[0];
}

// dQ and delta = rowsum(dO * O) for each query.
template <typename T>
__global__ void attention_dq_kernel(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out,
                                    const float* lse, Geometry g, float scale) {
  extern __shared__ float sm[];
  const int ld = g.HS + 1, nd = g.HS / 32;
  float* Ks = sm;
  float* Vs = Ks + kTile * ld;
  float* Qs = Vs + kTile * ld;
  float* dOs = Qs + kWarps * g.HS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kWarps, t = first + warp;
  float* q = Qs + warp * g.HS;
  float* dO = dOs + warp * g.HS;
  float D = 0.0f, row_lse = 0.0f;
  if (t < g.Tn) {
    float partial = 0.0f;
    for (int d = lane; d < g.HS; d += 32) {
      q[d] = to_f(qkv[g.q(b, t, h) + d]) * scale;
      dO[d] = to_f(dout[g.o(b, t, h) + d]);
      partial += dO[d] * to_f(out[g.o(b, t, h) + d]);
    }
    D = warp_sum(partial);
    row_lse = lse[(size_t(b) * g.NH + h) * g.Tn + t];
    if (lane == 0) delta[(size_t(b) * g.NH + h) * g.Tn + t] = D;
  }
  __syncwarp();

  float acc[kMaxDims] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int last = min(first + kWarps, g.Tn) - 1;
  for (int k0 = g.first_tile(first); k0 <= last; k0 += kTile) {
    __syncthreads();
    load_tile(Ks, qkv, g, b, h, k0, g.C, 1.0f);
    load_tile(Vs, qkv, g, b, h, k0, 2 * g.C, 1.0f);
    __syncthreads();
    if (t >= g.Tn || k0 > t) continue;
    const int key = k0 + lane;
    float ds = 0.0f;
    if (key <= t && g.in_window(t, key)) {
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < g.HS; ++d) {
        s += q[d] * Ks[lane * ld + d];
        dp += dO[d] * Vs[lane * ld + d];
      }
      ds = expf(s - row_lse) * (dp - D);
    }
    for (int j = 0; j < kTile; ++j) {
      const float dsj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
      for (int dd = 0; dd < kMaxDims; ++dd)
        if (dd < nd) acc[dd] += dsj * Ks[j * ld + lane + 32 * dd];
    }
  }
  if (t >= g.Tn) return;
  for (int dd = 0; dd < nd; ++dd) dqkv[g.q(b, t, h) + lane + 32 * dd] = from_f<T>(acc[dd] * scale);
}

// dK and dV: each warp owns one key and walks the query tiles at or after it.
template <typename T>
__global__ void attention_dkv_kernel(T* dqkv, const float* delta, const T* dout, const T* qkv, const float* lse,
                                     Geometry g, float scale) {
  extern __shared__ float sm[];
  const int ld = g.HS + 1, nd = g.HS / 32;
  float* Qs = sm;                    // [kTile][ld], scaled
  float* dOs = Qs + kTile * ld;      // [kTile][ld]
  float* Kw = dOs + kTile * ld;      // [kWarps][HS]
  float* Vw = Kw + kWarps * g.HS;    // [kWarps][HS]
  float* lse_s = Vw + kWarps * g.HS; // [kTile]
  float* D_s = lse_s + kTile;        // [kTile]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kWarps, key = first + warp;
  const size_t stats = (size_t(b) * g.NH + h) * g.Tn;
  float* k = Kw + warp * g.HS;
  float* v = Vw + warp * g.HS;
  if (key < g.Tn)
    for (int d = lane; d < g.HS; d += 32) {
      k[d] = to_f(qkv[g.k(b, key, h) + d]);
      v[d] = to_f(qkv[g.v(b, key, h) + d]);
    }

  float dk[kMaxDims] = {0.0f, 0.0f, 0.0f, 0.0f}, dv[kMaxDims] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Queries from the block's first key up to its last key's window.
  const int q_end = g.window <= 0 ? g.Tn : min(g.Tn, first + kWarps - 1 + g.window);
  for (int q0 = (first / kTile) * kTile; q0 < q_end; q0 += kTile) {
    __syncthreads();
    load_tile(Qs, qkv, g, b, h, q0, 0, scale);
    for (int i = threadIdx.x; i < kTile * g.HS; i += blockDim.x) {
      int j = i / g.HS, d = i % g.HS, t = q0 + j;
      dOs[j * ld + d] = t < g.Tn ? to_f(dout[g.o(b, t, h) + d]) : 0.0f;
    }
    if (threadIdx.x < kTile) {
      int t = q0 + threadIdx.x;
      lse_s[threadIdx.x] = t < g.Tn ? lse[stats + t] : 0.0f;
      D_s[threadIdx.x] = t < g.Tn ? delta[stats + t] : 0.0f;
    }
    __syncthreads();
    if (key >= g.Tn) continue;
    const int t = q0 + lane;
    float p = 0.0f, ds = 0.0f;
    if (t >= key && t < g.Tn && g.in_window(t, key)) {
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < g.HS; ++d) {
        s += Qs[lane * ld + d] * k[d];
        dp += dOs[lane * ld + d] * v[d];
      }
      p = expf(s - lse_s[lane]);
      ds = p * (dp - D_s[lane]);
    }
    for (int j = 0; j < kTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float dsj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
      for (int dd = 0; dd < kMaxDims; ++dd)
        if (dd < nd) {
          dv[dd] += pj * dOs[j * ld + lane + 32 * dd];
          dk[dd] += dsj * Qs[j * ld + lane + 32 * dd];
        }
    }
  }
  if (key >= g.Tn) return;
  for (int dd = 0; dd < nd; ++dd) {
    dqkv[g.k(b, key, h) + lane + 32 * dd] = from_f<T>(dk[dd]);
    dqkv[g.v(b, key, h) + lane + 32 * dd] = from_f<T>(dv[dd]);
  }
}

Geometry geometry(int Tn, int NH, int HS, int window) {
  if (HS % 32 != 0 || HS > 32 * kMaxDims)
    throw CudaError("attention kernel: head size " + std::to_string(HS) +
                    " is not supported (needs a multiple of 32, at most 128)");
  return Geometry{Tn, NH, HS, NH * HS, window, size_t(3) * NH * HS};
}

}  // namespace

template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int Tn, int NH, int HS, int window, const T* sinks,
                       cudaStream_t s) {
  Geometry g = geometry(Tn, NH, HS, window);
  dim3 grid(unsigned((Tn + kWarps - 1) / kWarps), unsigned(B * NH));
  size_t shared = (2 * kTile * (HS + 1) + kWarps * HS) * sizeof(float);
  attention_forward_kernel<<<grid, kWarps * 32, shared, s>>>(out, lse, qkv, sinks, g, 1.0f / std::sqrt(float(HS)));
  cudaCheckLaunch();
}

template <typename T>
void attention_backward(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                        int Tn, int NH, int HS, int window, const T* sinks, float* dsinks, cudaStream_t s) {
  Geometry g = geometry(Tn, NH, HS, window);
  const float scale = 1.0f / std::sqrt(float(HS));
  dim3 grid(unsigned((Tn + kWarps - 1) / kWarps), unsigned(B * NH));
  size_t shared_dq = (2 * kTile * (HS + 1) + 2 * kWarps * HS) * sizeof(float);
  attention_dq_kernel<<<grid, kWarps * 32, shared_dq, s>>>(dqkv, delta, dout, qkv, out, lse, g, scale);
  cudaCheckLaunch();
  size_t shared_dkv = (2 * kTile * (HS + 1) + 2 * kWarps * HS + 2 * kTile) * sizeof(float);
  attention_dkv_kernel<<<grid, kWarps * 32, shared_dkv, s>>>(dqkv, delta, dout, qkv, lse, g, scale);
  cudaCheckLaunch();
  if (sinks && dsinks) {
    attention_sink_grad_kernel<<<unsigned(NH), 256, 0, s>>>(dsinks, delta, lse, sinks, B, Tn, NH);
    cudaCheckLaunch();
  }
}

#define INSTANTIATE(T)                                                                                          \
  template void attention_forward<T>(T*, float*, const T*, int, int, int, int, int, const T*, cudaStream_t);    \
  template void attention_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int, int,    \
                                      int, int, const T*, float*, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
