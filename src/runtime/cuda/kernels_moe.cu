// Mixture-of-experts row moves on the GPU: one block per output row (its threads stride over the
// columns), so each row is written by one block in a fixed order: deterministic, no atomics.
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels_moe.h"

namespace trident::cuda {

namespace {
constexpr unsigned kThreads = 128;

template <typename T>
__global__ void gather_rows_kernel(T* dst, const T* src, const int32_t* rows, const float* scale, int C) {
  const int i = blockIdx.x;
  const T* s = src + size_t(rows[i]) * C;
  const float a = scale ? scale[i] : 1.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dst[size_t(i) * C + c] = from_f<T>(a * to_f(s[c]));
}

template <typename T>
__global__ void combine_rows_kernel(T* out, const T* src, const int32_t* pos, const float* w, int k, int C) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int p = pos[t * k + j];
      if (p >= 0) acc += (w ? w[t * k + j] : 1.0f) * to_f(src[size_t(p) * C + c]);
    }
    out[size_t(t) * C + c] = from_f<T>(acc);
  }
}

template <typename T>
__global__ void gather_row_dots_kernel(float* dots, const T* a, const int32_t* rows, const T* b, int C) {
  const int i = blockIdx.x;
  const T* x = a + size_t(rows[i]) * C;
  const T* y = b + size_t(i) * C;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) acc += to_f(x[c]) * to_f(y[c]);
  acc = block_sum(acc);
  if (threadIdx.x == 0) dots[i] = acc;
}
}  // namespace

template <typename T>
void gather_rows(T* dst, const T* src, const int32_t* rows, const float* scale, int n, int C, cudaStream_t s) {
  if (n == 0) return;
  gather_rows_kernel<<<n, kThreads, 0, s>>>(dst, src, rows, scale, C);
  cudaCheckLaunch();
}

template <typename T>
void combine_rows(T* out, const T* src, const int32_t* pos, const float* w, int N, int k, int C, cudaStream_t s) {
  if (N == 0) return;
  combine_rows_kernel<<<N, kThreads, 0, s>>>(out, src, pos, w, k, C);
  cudaCheckLaunch();
}

template <typename T>
void gather_row_dots(float* dots, const T* a, const int32_t* rows, const T* b, int n, int C, cudaStream_t s) {
  if (n == 0) return;
  gather_row_dots_kernel<<<n, kThreads, 0, s>>>(dots, a, rows, b, C);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                  \
  template void gather_rows<T>(T*, const T*, const int32_t*, const float*, int, int, cudaStream_t);     \
  template void combine_rows<T>(T*, const T*, const int32_t*, const float*, int, int, int, cudaStream_t); \
  template void gather_row_dots<T>(float*, const T*, const int32_t*, const T*, int, int, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
