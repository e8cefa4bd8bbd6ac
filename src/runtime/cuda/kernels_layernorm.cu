// LayerNorm forward and backward: one warp per row, fp32 statistics, eps the model's (1e-5 by default, PyTorch's).
#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels.h"

namespace trident::cuda {

namespace {

constexpr int kWarps = 8;

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean_out, float* rstd_out, const T* inp, const T* weight,
                                         const T* bias, int N, int C, float eps) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kWarps + threadIdx.x / 32;
  if (row >= N) return;
  const T* x = inp + size_t(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += 32) sum += to_f(x[c]);
  const float mean = warp_sum(sum) / C;
  float var = 0.0f;
  for (int c = lane; c < C; c += 32) {
    float d = to_f(x[c]) - mean;
    var += d * d;
  }
  const float rstd = rsqrtf(warp_sum(var) / C + eps);
  T* y = out + size_t(row) * C;
  for (int c = lane; c < C; c += 32)
    y[c] = from_f<T>((to_f(x[c]) - mean) * rstd * to_f(weight[c]) + to_f(bias[c]));
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// Each block owns a stride of rows; weight and bias gradients are summed in shared memory
// first so each block adds to global memory once per channel.
template <typename T>
__global__ void layernorm_backward_kernel(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                                          const T* weight, const float* mean, const float* rstd, int N, int C) {
  extern __shared__ float shared[];
  float* dw = shared;
  float* db = shared + C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) dw[c] = db[c] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  for (int row = blockIdx.x * kWarps + threadIdx.x / 32; row < N; row += gridDim.x * kWarps) {
    const T* x = inp + size_t(row) * C;
    const T* dy = dout + size_t(row) * C;
    T* dx = dinp + size_t(row) * C;
    const float mu = mean[row], rs = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int c = lane; c < C; c += 32) {
      float g = to_f(dy[c]) * to_f(weight[c]);
      sum_g += g;
      sum_gx += g * (to_f(x[c]) - mu) * rs;
    }
    const float mean_g = warp_sum(sum_g) / C, mean_gx = warp_sum(sum_gx) / C;
    for (int c = lane; c < C; c += 32) {
      float d = to_f(dy[c]);
      float xhat = (to_f(x[c]) - mu) * rs;
      float g = d * to_f(weight[c]);
      dx[c] = from_f<T>(to_f(dx[c]) + rs * (g - mean_g - xhat * mean_gx));
      atomicAdd(&dw[c], d * xhat);
      atomicAdd(&db[c], d);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    atomicAdd(&dweight[c], dw[c]);
    atomicAdd(&dbias[c], db[c]);
  }
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       float eps, cudaStream_t s) {
  unsigned blocks = unsigned((N + kWarps - 1) / kWarps);
  layernorm_forward_kernel<<<blocks, kWarps * 32, 0, s>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
  cudaCheckLaunch();
}

template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t s) {
  unsigned blocks = unsigned((N + kWarps - 1) / kWarps);
  if (blocks > 512) blocks = 512;
  size_t shared = 2 * size_t(C) * sizeof(float);
  if (shared > 48 * 1024)
    cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(shared)));
  layernorm_backward_kernel<<<blocks, kWarps * 32, shared, s>>>(dinp, dweight, dbias, dout, inp, weight, mean, rstd,
                                                                N, C);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                           \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, float, cudaStream_t);\
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*, const float*,           \
                                      const float*, int, int, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
