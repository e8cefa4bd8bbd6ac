// Llama's blocks on the GPU: RMSNorm (one warp per row, fp32 statistics, the model's eps), QK-norm
// (one warp per head of a row), SwiGLU and
// rotary embeddings (one thread per element / per pair, grid-stride). float and bf16 instances.
#include <cmath>

#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels_llama.h"

namespace trident::cuda {

namespace {

constexpr int kWarps = 8;
constexpr unsigned kThreads = 256;

template <typename T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd_out, const T* inp, const T* weight, int N, int C, float eps) {
  const int lane = threadIdx.x % 32, row = blockIdx.x * kWarps + threadIdx.x / 32;
  if (row >= N) return;
  const T* x = inp + size_t(row) * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += to_f(x[c]) * to_f(x[c]);
  const float r = rsqrtf(warp_sum(ss) / C + eps);
  T* y = out + size_t(row) * C;
  for (int c = lane; c < C; c += 32) y[c] = from_f<T>(to_f(x[c]) * r * to_f(weight[c]));
  if (lane == 0) rstd_out[row] = r;
}

// dweight summed per block in shared memory, then once per channel into global memory.
template <typename T>
__global__ void rmsnorm_backward_kernel(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
                                        const float* rstd, int N, int C) {
  extern __shared__ float dw[];
  for (int c = threadIdx.x; c < C; c += blockDim.x) dw[c] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int row = blockIdx.x * kWarps + threadIdx.x / 32; row < N; row += gridDim.x * kWarps) {
    const T* x = inp + size_t(row) * C;
    const T* dy = dout + size_t(row) * C;
    T* dx = dinp + size_t(row) * C;
    const float r = rstd[row];
    float gx = 0.0f;
    for (int c = lane; c < C; c += 32) gx += to_f(dy[c]) * to_f(weight[c]) * to_f(x[c]);
    const float k = r * r * r * warp_sum(gx) / C;
    for (int c = lane; c < C; c += 32) {
      const float xv = to_f(x[c]), d = to_f(dy[c]);
      dx[c] = from_f<T>(to_f(dx[c]) + r * d * to_f(weight[c]) - k * xv);
      atomicAdd(&dw[c], d * xv * r);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&dweight[c], dw[c]);
}

// QK-norm: one warp per (row, head), in place; the input kept in saved, rstd per head.
template <typename T>
__global__ void head_rmsnorm_forward_kernel(T* x, T* saved, float* rstd, const T* weight, int N, int heads, int hd,
                                            size_t row, float eps) {
  const int lane = threadIdx.x % 32, item = blockIdx.x * kWarps + threadIdx.x / 32;
  if (item >= N * heads) return;
  T* v = x + size_t(item / heads) * row + size_t(item % heads) * hd;
  T* keep = saved + size_t(item) * hd;
  float ss = 0.0f;
  for (int d = lane; d < hd; d += 32) ss += to_f(v[d]) * to_f(v[d]), keep[d] = v[d];
  const float r = rsqrtf(warp_sum(ss) / hd + eps);
  for (int d = lane; d < hd; d += 32) v[d] = from_f<T>(to_f(keep[d]) * r * to_f(weight[d]));
  if (lane == 0) rstd[item] = r;
}

// Its backward in place on dx; dweight summed per block in shared memory, then once per feature.
template <typename T>
__global__ void head_rmsnorm_backward_kernel(T* dx, float* dweight, const T* saved, const T* weight, const float* rstd,
                                             int N, int heads, int hd, size_t row) {
  extern __shared__ float dw[];
  for (int d = threadIdx.x; d < hd; d += blockDim.x) dw[d] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int item = blockIdx.x * kWarps + threadIdx.x / 32; item < N * heads; item += gridDim.x * kWarps) {
    T* dy = dx + size_t(item / heads) * row + size_t(item % heads) * hd;
    const T* v = saved + size_t(item) * hd;
    const float r = rstd[item];
    float gx = 0.0f;
    for (int d = lane; d < hd; d += 32) gx += to_f(dy[d]) * to_f(weight[d]) * to_f(v[d]);
    const float k = r * r * r * warp_sum(gx) / hd;
    for (int d = lane; d < hd; d += 32) {
      const float xv = to_f(v[d]), g = to_f(dy[d]);
      atomicAdd(&dw[d], g * xv * r);
      dy[d] = from_f<T>(r * g * to_f(weight[d]) - k * xv);
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < hd; d += blockDim.x) atomicAdd(&dweight[d], dw[d]);
}

template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* gu, size_t N, int F) {
  const size_t n = N * size_t(F);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / F, j = i % F;
    const float g = to_f(gu[row * 2 * F + j]), u = to_f(gu[row * 2 * F + F + j]);
    out[i] = from_f<T>(g / (1.0f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(T* dgu, const T* gu, const T* dout, size_t N, int F) {
  const size_t n = N * size_t(F);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / F, j = i % F;
    const float g = to_f(gu[row * 2 * F + j]), u = to_f(gu[row * 2 * F + F + j]), dy = to_f(dout[i]);
    const float s = 1.0f / (1.0f + expf(-g));
    dgu[row * 2 * F + F + j] = from_f<T>(dy * g * s);
    dgu[row * 2 * F + j] = from_f<T>(dy * u * s * (1.0f + g * (1.0f - s)));
  }
}

// GPT-OSS's unit: g = min(gate, limit), u = clamp(up, -limit, limit), (u + 1) g sigmoid(1.702 g).
template <typename T>
__global__ void swiglu_oss_forward_kernel(T* out, const T* gu, size_t N, int F, float limit) {
  const size_t n = N * size_t(F);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / F, j = i % F;
    const float g = fminf(to_f(gu[row * 2 * F + j]), limit);
    const float u = fminf(fmaxf(to_f(gu[row * 2 * F + F + j]), -limit), limit);
    out[i] = from_f<T>((u + 1.0f) * g / (1.0f + expf(-1.702f * g)));
  }
}

// Zero gradient where the input was clamped (torch.clamp's backward: the bounds themselves pass).
template <typename T>
__global__ void swiglu_oss_backward_kernel(T* dgu, const T* gu, const T* dout, size_t N, int F, float limit) {
  const size_t n = N * size_t(F);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / F, j = i % F;
    const float graw = to_f(gu[row * 2 * F + j]), uraw = to_f(gu[row * 2 * F + F + j]), dy = to_f(dout[i]);
    const float g = fminf(graw, limit), u = fminf(fmaxf(uraw, -limit), limit);
    const float s = 1.0f / (1.0f + expf(-1.702f * g));
    dgu[row * 2 * F + F + j] = from_f<T>(uraw >= -limit && uraw <= limit ? dy * g * s : 0.0f);
    dgu[row * 2 * F + j] = from_f<T>(graw <= limit ? dy * (u + 1.0f) * s * (1.0f + 1.702f * g * (1.0f - s)) : 0.0f);
  }
}

// One thread per (token, head, pair).
template <typename T>
__global__ void rope_kernel(T* x, size_t tokens, int Tn, int heads, int hd, size_t row, kernels::RopeFreq freq,
                            float sign) {
  const int half = hd / 2;
  const size_t n = tokens * size_t(heads) * half;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int pair = int(i % half), h = int((i / half) % heads);
    const size_t token = i / (size_t(half) * heads);
    const int t = int(token % Tn);
    const float angle = float(t) * kernels::rope_inv_freq<float>(freq, pair, hd);
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign * freq.attention;  // YaRN's attention factor (1 otherwise) on cos and sin
    c *= freq.attention;
    T* p = x + token * row + size_t(h) * hd + 2 * pair;
    const float x0 = to_f(p[0]), x1 = to_f(p[1]);
    p[0] = from_f<T>(x0 * c - x1 * s);
    p[1] = from_f<T>(x0 * s + x1 * c);
  }
}

// One thread per element of a qkv row: q copied, key and value slots read from their kv head.
template <typename T>
__global__ void gqa_expand_kernel(T* qkv, const T* q, const T* kv, size_t N, int nh, int nkv, int hd) {
  const size_t A = size_t(nh) * hd, n = N * 3 * A;
  const int group = nh / nkv;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t token = i / (3 * A), j = i % (3 * A);
    if (j < A) {
      qkv[i] = q[token * A + j];
      continue;
    }
    const size_t part = j / A - 1, within = j % A;  // part 0: keys, 1: values
    const size_t head = within / hd, d = within % hd;
    qkv[i] = kv[token * 2 * nkv * hd + (part * nkv + head / group) * hd + d];
  }
}

// One thread per element of dq and dkv: a kv element sums the nh / nkv repeated heads of its
// group in head order (no atomics: deterministic, as the CPU kernel).
template <typename T>
__global__ void gqa_reduce_kernel(T* dq, T* dkv, const T* dqkv, size_t N, int nh, int nkv, int hd) {
  const size_t A = size_t(nh) * hd, K = size_t(nkv) * hd, width = A + 2 * K, n = N * width;
  const int group = nh / nkv;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t token = i / width, j = i % width;
    const T* row = dqkv + token * 3 * A;
    if (j < A) {
      dq[token * A + j] = row[j];
      continue;
    }
    const size_t jj = j - A, part = jj / K, kv_head = (jj % K) / hd, d = jj % hd;
    float sum = 0.0f;
    for (size_t h = kv_head * group; h < (kv_head + 1) * group; ++h) sum += to_f(row[(1 + part) * A + h * hd + d]);
    dkv[token * 2 * K + jj] = from_f<T>(sum);
  }
}

// One thread per element of dst's blocks: a summing copy (dst_head 0) adds the heads in order.
template <typename T>
__global__ void copy_heads_kernel(T* dst, size_t dst_row, size_t dst_head, const T* src, size_t src_row,
                                  size_t src_head, size_t rows, int heads, int cols, bool accumulate, float scale) {
  const int dst_heads = dst_head == 0 ? 1 : heads, summed = dst_head == 0 ? heads : 1;
  const size_t n = rows * size_t(dst_heads) * size_t(cols);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / (size_t(dst_heads) * cols), h = (i / cols) % dst_heads, c = i % cols;
    T* d = dst + r * dst_row + h * dst_head + c;
    float v = 0.0f;
    if (src)
      for (int k = 0; k < summed; ++k) v += to_f(src[r * src_row + (h + k) * src_head + c]);
    *d = from_f<T>((accumulate ? to_f(*d) : 0.0f) + scale * v);
  }
}

}  // namespace

template <typename T>
void gqa_expand(T* qkv, const T* q, const T* kv, size_t N, int nh, int nkv, int hd, cudaStream_t s) {
  gqa_expand_kernel<<<blocks_for(N * 3 * size_t(nh) * hd, kThreads), kThreads, 0, s>>>(qkv, q, kv, N, nh, nkv, hd);
  cudaCheckLaunch();
}

template <typename T>
void copy_heads(T* dst, size_t dst_row, size_t dst_head, const T* src, size_t src_row, size_t src_head, size_t rows,
                int heads, int cols, bool accumulate, float scale, cudaStream_t s) {
  const size_t n = rows * size_t(dst_head == 0 ? 1 : heads) * size_t(cols);
  if (n == 0) return;
  copy_heads_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dst, dst_row, dst_head, src, src_row, src_head, rows,
                                                                 heads, cols, accumulate, scale);
  cudaCheckLaunch();
}

template <typename T>
void gqa_reduce(T* dq, T* dkv, const T* dqkv, size_t N, int nh, int nkv, int hd, cudaStream_t s) {
  const size_t n = N * (size_t(nh) + 2 * size_t(nkv)) * hd;
  gqa_reduce_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dq, dkv, dqkv, N, nh, nkv, hd);
  cudaCheckLaunch();
}

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps, cudaStream_t s) {
  rmsnorm_forward_kernel<<<unsigned((N + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(out, rstd, inp, weight, N, C, eps);
  cudaCheckLaunch();
}

template <typename T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, cudaStream_t s) {
  unsigned blocks = unsigned((N + kWarps - 1) / kWarps);
  if (blocks > 512) blocks = 512;
  const size_t shared = size_t(C) * sizeof(float);
  if (shared > 48 * 1024)
    cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  rmsnorm_backward_kernel<<<blocks, kWarps * 32, shared, s>>>(dinp, dweight, dout, inp, weight, rstd, N, C);
  cudaCheckLaunch();
}

template <typename T>
void head_rmsnorm_forward(T* x, T* saved, float* rstd, const T* weight, int N, int heads, int hd, size_t row, float eps,
                          cudaStream_t s) {
  const unsigned blocks = unsigned((size_t(N) * heads + kWarps - 1) / kWarps);
  head_rmsnorm_forward_kernel<<<blocks, kWarps * 32, 0, s>>>(x, saved, rstd, weight, N, heads, hd, row, eps);
  cudaCheckLaunch();
}

template <typename T>
void head_rmsnorm_backward(T* dx, float* dweight, const T* saved, const T* weight, const float* rstd, int N, int heads,
                           int hd, size_t row, cudaStream_t s) {
  unsigned blocks = unsigned((size_t(N) * heads + kWarps - 1) / kWarps);
  if (blocks > 512) blocks = 512;
  head_rmsnorm_backward_kernel<<<blocks, kWarps * 32, size_t(hd) * sizeof(float), s>>>(dx, dweight, saved, weight, rstd,
                                                                                        N, heads, hd, row);
  cudaCheckLaunch();
}

template <typename T>
void swiglu_forward(T* out, const T* gate_up, size_t N, int F, cudaStream_t s) {
  swiglu_forward_kernel<<<blocks_for(N * F, kThreads), kThreads, 0, s>>>(out, gate_up, N, F);
  cudaCheckLaunch();
}

template <typename T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, size_t N, int F, cudaStream_t s) {
  swiglu_backward_kernel<<<blocks_for(N * F, kThreads), kThreads, 0, s>>>(dgate_up, gate_up, dout, N, F);
  cudaCheckLaunch();
}

template <typename T>
void swiglu_oss_forward(T* out, const T* gate_up, size_t N, int F, float limit, cudaStream_t s) {
  swiglu_oss_forward_kernel<<<blocks_for(N * F, kThreads), kThreads, 0, s>>>(out, gate_up, N, F, limit);
  cudaCheckLaunch();
}

template <typename T>
void swiglu_oss_backward(T* dgate_up, const T* gate_up, const T* dout, size_t N, int F, float limit, cudaStream_t s) {
  swiglu_oss_backward_kernel<<<blocks_for(N * F, kThreads), kThreads, 0, s>>>(dgate_up, gate_up, dout, N, F, limit);
  cudaCheckLaunch();
}

template <typename T>
void rope(T* x, size_t tokens, int Tn, int heads, int hd, size_t row, const kernels::RopeFreq& freq, bool inverse,
          cudaStream_t s) {
  const size_t n = tokens * size_t(heads) * size_t(hd / 2);
  rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(x, tokens, Tn, heads, hd, row, freq, inverse ? -1.0f : 1.0f);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                        \
  template void rmsnorm_forward<T>(T*, float*, const T*, const T*, int, int, float, cudaStream_t);            \
  template void head_rmsnorm_forward<T>(T*, T*, float*, const T*, int, int, int, size_t, float, cudaStream_t); \
  template void head_rmsnorm_backward<T>(T*, float*, const T*, const T*, const float*, int, int, int, size_t,  \
                                         cudaStream_t);                                                        \
  template void rmsnorm_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int,         \
                                    cudaStream_t);                                                            \
  template void swiglu_forward<T>(T*, const T*, size_t, int, cudaStream_t);                                   \
  template void swiglu_backward<T>(T*, const T*, const T*, size_t, int, cudaStream_t);                        \
  template void swiglu_oss_forward<T>(T*, const T*, size_t, int, float, cudaStream_t);                        \
  template void swiglu_oss_backward<T>(T*, const T*, const T*, size_t, int, float, cudaStream_t);             \
  template void rope<T>(T*, size_t, int, int, int, size_t, const kernels::RopeFreq&, bool, cudaStream_t);     \
  template void copy_heads<T>(T*, size_t, size_t, const T*, size_t, size_t, size_t, int, int, bool, float,       \
                               cudaStream_t);                                                                   \
  template void gqa_expand<T>(T*, const T*, const T*, size_t, int, int, int, cudaStream_t);                   \
  template void gqa_reduce<T>(T*, T*, const T*, size_t, int, int, int, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
