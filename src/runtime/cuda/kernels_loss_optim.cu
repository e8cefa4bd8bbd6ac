// Fused softmax + cross-entropy, global gradient norm and AdamW.
#include <cmath>

#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels.h"

namespace trident::cuda {

namespace {

// One block per row: max, sum of exponentials, loss, then the row becomes its own gradient.
template <typename T>
__global__ void softmax_cross_entropy_kernel(float* losses, T* logits, const int* targets, int V, int Vp,
                                             float dloss) {
  T* row = logits + size_t(blockIdx.x) * Vp;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, to_f(row[i]));
  m = block_max(m);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(to_f(row[i]) - m);
  sum = block_sum(sum);
  const int target = targets[blockIdx.x];
  const float target_logit = to_f(row[target]);
  __syncthreads();  // everyone has read row[target] before it is overwritten
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + m - target_logit;
  const float inv_sum = 1.0f / sum;
  for (int i = threadIdx.x; i < Vp; i += blockDim.x) {
    float g = 0.0f;
    if (i < V) g = (expf(to_f(row[i]) - m) * inv_sum - (i == target ? 1.0f : 0.0f)) * dloss;
    row[i] = from_f<T>(g);
  }
}

__global__ void sum_of_squares_kernel(float* out, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    sum += x[i] * x[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) atomicAdd(out, sum);
}

template <typename T>
__global__ void adamw_kernel(float* master, T* param, const float* grad, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float bias1, float bias2,
                             const float* norm_sq, float max_norm) {
  float scale = 1.0f;
  if (max_norm > 0.0f) scale = fminf(1.0f, max_norm / (sqrtf(*norm_sq) + 1e-6f));
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float g = grad[i] * scale;
    float p = master[i] * (1.0f - lr * weight_decay);
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    p -= lr * (mi / bias1) / (sqrtf(vi / bias2) + eps);
    master[i] = p;
    param[i] = from_f<T>(p);
  }
}

constexpr unsigned kThreads = 256;

}  // namespace

template <typename T>
void softmax_cross_entropy(float* losses, T* logits, const int* targets, int N, int V, int Vp, float dloss,
                           cudaStream_t s) {
  softmax_cross_entropy_kernel<<<N, 1024, 0, s>>>(losses, logits, targets, V, Vp, dloss);
  cudaCheckLaunch();
}

void sum_of_squares(float* norm_sq, const float* x, size_t n, cudaStream_t s) {
  unsigned blocks = blocks_for(n, kThreads);
  if (blocks > 1024) blocks = 1024;
  sum_of_squares_kernel<<<blocks, kThreads, 0, s>>>(norm_sq, x, n);
  cudaCheckLaunch();
}

template <typename T>
void adamw_update(float* master, T* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step, const float* norm_sq, float max_norm,
                  cudaStream_t s) {
  // Bias corrections in double on the host, as PyTorch computes them in Python floats.
  float bias1 = float(1.0 - std::pow(double(beta1), step));
  float bias2 = float(1.0 - std::pow(double(beta2), step));
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(master, param, grad, m, v, n, lr, beta1, beta2, eps,
                                                            weight_decay, bias1, bias2, norm_sq, max_norm);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                             \
  template void softmax_cross_entropy<T>(float*, T*, const int*, int, int, int, float, cudaStream_t);              \
  template void adamw_update<T>(float*, T*, const float*, float*, float*, size_t, float, float, float, float, float, \
                                int, const float*, float, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda
