// Residual, GELU, bias gradient and casts: one thread per element, grid-stride.
#include <cmath>

#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels.h"

namespace trident::cuda {

namespace {



template <typename T>
__global__ void residual_kernel(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float x = to_f(inp[i]);
    out[i] = from_f<T>(0.5f * x * (1.0f + tanhf(kGeluScale * (x + 0.044715f * x * x * x))));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float x = to_f(inp[i]);
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] = from_f<T>(grad * to_f(dout[i]));
  }
}

// One thread per output channel column strip: block (32 x 8) covers 32 channels; the 8 rows of
// threads stride over the N rows, then combine in shared memory. Coalesced along channels.
template <typename T>
__global__ void bias_backward_kernel(float* dbias, const T* dout, int N, int OC) {
  __shared__ float partial[8][33];
  int o = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (o < OC)
    for (int r = blockIdx.y * 8 + threadIdx.y; r < N; r += gridDim.y * 8) sum += to_f(dout[size_t(r) * OC + o]);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && o < OC) {
    for (int y = 1; y < 8; ++y) sum += partial[y][threadIdx.x];
    atomicAdd(&dbias[o], sum);
  }
}

template <typename T>
__global__ void cast_from_float_kernel(T* out, const float* in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(in[i]);
}
template <typename T>
__global__ void cast_to_float_kernel(float* out, const T* in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = to_f(in[i]);
}

constexpr unsigned kThreads = 256;

}  // namespace



template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t s) {
  residual_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, a, b, n);
  cudaCheckLaunch();
}

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t s) {
  gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, inp, n);
  cudaCheckLaunch();
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t s) {
  gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dinp, inp, dout, n);
  cudaCheckLaunch();
}

template <typename T>
void bias_backward(float* dbias, const T* dout, int N, int OC, cudaStream_t s) {
  dim3 block(32, 8);
  unsigned row_blocks = unsigned((N + 255) / 256);
  dim3 grid(unsigned((OC + 31) / 32), row_blocks < 64 ? row_blocks : 64);
  bias_backward_kernel<<<grid, block, 0, s>>>(dbias, dout, N, OC);
  cudaCheckLaunch();
}

template <typename T>
void cast_from_float(T* out, const float* in, size_t n, cudaStream_t s) {
  cast_from_float_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, in, n);
  cudaCheckLaunch();
}
template <typename T>
void cast_to_float(float* out, const T* in, size_t n, cudaStream_t s) {
  cast_to_float_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, in, n);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                          \
  template void residual_forward<T>(T*, const T*, const T*, size_t, cudaStream_t);                              \
  template void gelu_forward<T>(T*, const T*, size_t, cudaStream_t);                                            \
  template void gelu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);                                 \
  template void bias_backward<T>(float*, const T*, int, int, cudaStream_t);                                     \
  template void cast_from_float<T>(T*, const float*, size_t, cudaStream_t);                                     \
  template void cast_to_float<T>(float*, const T*, size_t, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
