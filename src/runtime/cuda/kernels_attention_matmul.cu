// Permutes and causal softmax for attention_matmul.h: one thread per element for the permutes,
// one warp per row for the softmax (fp32 statistics).
#include "runtime/cuda/attention_matmul.h"
#include "runtime/cuda/kernel_util.cuh"

namespace trident::cuda {

namespace {

constexpr unsigned kThreads = 256;

template <typename T>
__global__ void to_heads_kernel(T* dst, const T* src, int src_stride, int Tn, int NH, int HS, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    // i indexes dst (b, h, t, d)
    const int d = int(i % HS);
    const int t = int((i / HS) % Tn);
    const int h = int((i / (size_t(HS) * Tn)) % NH);
    const size_t b = i / (size_t(HS) * Tn * NH);
    dst[i] = src[(b * Tn + t) * size_t(src_stride) + size_t(h) * HS + d];
  }
}

template <typename T>
__global__ void from_heads_kernel(T* dst, int dst_stride, const T* src, int Tn, int NH, int HS, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int d = int(i % HS);
    const int t = int((i / HS) % Tn);
    const int h = int((i / (size_t(HS) * Tn)) % NH);
    const size_t b = i / (size_t(HS) * Tn * NH);
    dst[(b * Tn + t) * size_t(dst_stride) + size_t(h) * HS + d] = src[i];
  }
}

template <typename T>
__global__ void causal_softmax_forward_kernel(T* probs, const float* scores, size_t rows, int Tn) {
  const size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int valid = int(row % Tn) + 1;  // keys 0 .. query
  const float* s = scores + row * Tn;
  T* p = probs + row * Tn;
  float m = -INFINITY;
  for (int j = lane; j < valid; j += 32) m = fmaxf(m, s[j]);
  m = warp_max(m);
  float sum = 0.0f;
  for (int j = lane; j < valid; j += 32) sum += expf(s[j] - m);
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < Tn; j += 32) p[j] = from_f<T>(j < valid ? expf(s[j] - m) * inv : 0.0f);
}

template <typename T>
__global__ void causal_softmax_backward_kernel(T* probs, const float* dprobs, size_t rows, int Tn) {
  const size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int valid = int(row % Tn) + 1;
  const float* dp = dprobs + row * Tn;
  T* p = probs + row * Tn;
  float dot = 0.0f;
  for (int j = lane; j < valid; j += 32) dot += to_f(p[j]) * dp[j];
  dot = warp_sum(dot);
  for (int j = lane; j < Tn; j += 32) p[j] = from_f<T>(j < valid ? to_f(p[j]) * (dp[j] - dot) : 0.0f);
}

}  // namespace

template <typename T>
void to_heads(T* dst, const T* src, int src_stride, int B, int Tn, int NH, int HS, cudaStream_t s) {
  size_t n = size_t(B) * Tn * NH * HS;
  to_heads_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dst, src, src_stride, Tn, NH, HS, n);
  cudaCheckLaunch();
}

template <typename T>
void from_heads(T* dst, int dst_stride, const T* src, int B, int Tn, int NH, int HS, cudaStream_t s) {
  size_t n = size_t(B) * Tn * NH * HS;
  from_heads_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dst, dst_stride, src, Tn, NH, HS, n);
  cudaCheckLaunch();
}

template <typename T>
void causal_softmax_forward(T* probs, const float* scores, size_t rows, int Tn, cudaStream_t s) {
  causal_softmax_forward_kernel<<<unsigned((rows + 7) / 8), kThreads, 0, s>>>(probs, scores, rows, Tn);
  cudaCheckLaunch();
}

template <typename T>
void causal_softmax_backward(T* probs, const float* dprobs, size_t rows, int Tn, cudaStream_t s) {
  causal_softmax_backward_kernel<<<unsigned((rows + 7) / 8), kThreads, 0, s>>>(probs, dprobs, rows, Tn);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                         \
  template void to_heads<T>(T*, const T*, int, int, int, int, int, cudaStream_t);              \
  template void from_heads<T>(T*, int, const T*, int, int, int, int, cudaStream_t);            \
  template void causal_softmax_forward<T>(T*, const float*, size_t, int, cudaStream_t);        \
  template void causal_softmax_backward<T>(T*, const float*, size_t, int, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
