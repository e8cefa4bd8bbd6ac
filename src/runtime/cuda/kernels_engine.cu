#include <cmath>

#include "runtime/cuda/kernel_util.cuh"
#include "runtime/cuda/kernels_engine.h"

namespace trident::cuda::engine_ops {

namespace {

constexpr unsigned kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); i += size_t(gridDim.x) * blockDim.x)

__global__ void scale_kernel(float* x, float f, size_t n) { GRID_STRIDE(i, n) x[i] *= f; }

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, int64_t C, int64_t v_offset,
                                         int64_t V_local, size_t n) {
  GRID_STRIDE(i, n) {
    const int64_t row = int64_t(i / C), c = int64_t(i % C), id = int64_t(tokens[row]) - v_offset;
    out[i] = (id >= 0 && id < V_local) ? wte[id * C + c] : from_f<T>(0.0f);
  }
}

template <typename T>
__global__ void add_positions_kernel(T* out, const T* wpe, int64_t Tn, int64_t C, size_t n) {
  GRID_STRIDE(i, n) out[i] = from_f<T>(to_f(out[i]) + to_f(wpe[(int64_t(i / C) % Tn) * C + int64_t(i % C)]));
}

template <typename T>
__global__ void embedding_backward_kernel(float* dwte, const T* dout, const int32_t* tokens, int64_t N, int64_t C,
                                          int64_t v_offset, int64_t V_local) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t id = int64_t(tokens[i]) - v_offset;
    if (id >= 0 && id < V_local) dwte[id * C + c] += to_f(dout[i * C + c]);
  }
}

template <typename T>
__global__ void positions_backward_kernel(float* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C) {
  GRID_STRIDE(i, size_t(Tn * C)) {
    float sum = 0.0f;
    for (int64_t b = 0; b < B; ++b) sum += to_f(dout[b * Tn * C + int64_t(i)]);
    dwpe[i] += sum;
  }
}

template <typename T>
__global__ void row_max_kernel(float* row_max, const T* logits, int64_t V, int64_t V_valid) {
  const T* row = logits + blockIdx.x * V;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V_valid; j += blockDim.x) m = fmaxf(m, to_f(row[j]));
  m = block_max(m);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <typename T>
__global__ void sumexp_target_kernel(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                                     const int32_t* targets, int64_t V, int64_t V_valid, int64_t v_offset) {
  const T* row = logits + blockIdx.x * V;
  const float m = row_max[blockIdx.x];
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < V_valid; j += blockDim.x) s += expf(to_f(row[j]) - m);
  s = block_sum(s);
  if (threadIdx.x == 0) {
    sumexp[blockIdx.x] = s;
    const int64_t id = int64_t(targets[blockIdx.x]) - v_offset;
    target_logit[blockIdx.x] = (id >= 0 && id < V_valid) ? to_f(row[id]) : 0.0f;
  }
}

__global__ void losses_kernel(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                              int64_t N) {
  GRID_STRIDE(i, size_t(N)) losses[i] = logf(sumexp[i]) + row_max[i] - target_logit[i];
}

template <typename T>
__global__ void xent_backward_kernel(T* logits, const float* row_max, const float* sumexp, const int32_t* targets,
                                     float dloss, int64_t V, int64_t V_valid, int64_t v_offset) {
  T* row = logits + blockIdx.x * V;
  const float m = row_max[blockIdx.x], inv = 1.0f / sumexp[blockIdx.x];
  const int64_t id = int64_t(targets[blockIdx.x]) - v_offset;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x)  // padding columns j >= V_valid: no gradient
    row[j] = j < V_valid ? from_f<T>(dloss * (expf(to_f(row[j]) - m) * inv - (j == id ? 1.0f : 0.0f))) : from_f<T>(0.0f);
}

__global__ void sum_squares_kernel(double* result, const float* x, size_t n) {
  float sum = 0.0f;
  GRID_STRIDE(i, n) sum += x[i] * x[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) atomicAdd(result, double(sum));
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float grad_scale, float bias1, float bias2) {
  GRID_STRIDE(i, n) {
    const float g = grad[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= lr * ((mi / bias1) / (sqrtf(vi / bias2) + eps) + weight_decay * param[i]);
  }
}

}  // namespace

void scale(float* x, float factor, size_t n, cudaStream_t s) {
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(x, factor, n);
  cudaCheckLaunch();
}
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t N, int64_t C, int64_t v_offset,
                       int64_t V_local, cudaStream_t s) {
  size_t n = size_t(N * C);
  embedding_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, tokens, wte, C, v_offset, V_local, n);
  cudaCheckLaunch();
}
template <typename T>
void add_positions(T* out, const T* wpe, int64_t B, int64_t Tn, int64_t C, cudaStream_t s) {
  size_t n = size_t(B * Tn * C);
  add_positions_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out, wpe, Tn, C, n);
  cudaCheckLaunch();
}
template <typename T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_offset,
                        int64_t V_local, cudaStream_t s) {
  embedding_backward_kernel<<<unsigned((C + 127) / 128), 128, 0, s>>>(dwte, dout, tokens, N, C, v_offset, V_local);
  cudaCheckLaunch();
}
template <typename T>
void positions_backward(float* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C, cudaStream_t s) {
  positions_backward_kernel<<<blocks_for(size_t(Tn * C), kThreads), kThreads, 0, s>>>(dwpe, dout, B, Tn, C);
  cudaCheckLaunch();
}
template <typename T>
void xent_row_max(float* row_max, const T* logits, int64_t N, int64_t V, int64_t V_valid, cudaStream_t s) {
  if (N == 0) return;
  row_max_kernel<<<unsigned(N), 512, 0, s>>>(row_max, logits, V, V_valid);
  cudaCheckLaunch();
}
template <typename T>
void xent_sumexp_target(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                        const int32_t* targets, int64_t N, int64_t V, int64_t V_valid, int64_t v_offset, cudaStream_t s) {
  if (N == 0) return;
  sumexp_target_kernel<<<unsigned(N), 512, 0, s>>>(sumexp, target_logit, logits, row_max, targets, V, V_valid,
                                                   v_offset);
  cudaCheckLaunch();
}
void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit, int64_t N,
                 cudaStream_t s) {
  losses_kernel<<<blocks_for(size_t(N), kThreads), kThreads, 0, s>>>(losses, sumexp, row_max, target_logit, N);
  cudaCheckLaunch();
}
template <typename T>
void xent_backward_inplace(T* logits, const float* row_max, const float* sumexp, const int32_t* targets, float dloss,
                           int64_t N, int64_t V, int64_t V_valid, int64_t v_offset, cudaStream_t s) {
  if (N == 0) return;
  xent_backward_kernel<<<unsigned(N), 512, 0, s>>>(logits, row_max, sumexp, targets, dloss, V, V_valid, v_offset);
  cudaCheckLaunch();
}
void sum_squares(double* result, const float* x, size_t n, cudaStream_t s) {
  cudaCheck(cudaMemsetAsync(result, 0, sizeof(double), s));
  unsigned blocks = blocks_for(n, kThreads);
  if (blocks > 1024) blocks = 1024;
  if (n > 0) sum_squares_kernel<<<blocks, kThreads, 0, s>>>(result, x, n);
  cudaCheckLaunch();
}
void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, float grad_scale, int64_t t, cudaStream_t s) {
  const float bias1 = float(1.0 - std::pow(double(beta1), double(t)));
  const float bias2 = float(1.0 - std::pow(double(beta2), double(t)));
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                                            grad_scale, bias1, bias2);
  cudaCheckLaunch();
}

#define INSTANTIATE(T)                                                                                         \
  template void embedding_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t, int64_t, int64_t, cudaStream_t); \
  template void add_positions<T>(T*, const T*, int64_t, int64_t, int64_t, cudaStream_t);                              \
  template void embedding_backward<T>(float*, const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t,          \
                                      cudaStream_t);                                                                 \
  template void positions_backward<T>(float*, const T*, int64_t, int64_t, int64_t, cudaStream_t);                     \
  template void xent_row_max<T>(float*, const T*, int64_t, int64_t, int64_t, cudaStream_t);                          \
  template void xent_sumexp_target<T>(float*, float*, const T*, const float*, const int32_t*, int64_t, int64_t,      \
                                      int64_t, int64_t, cudaStream_t);                                                        \
  template void xent_backward_inplace<T>(T*, const float*, const float*, const int32_t*, float, int64_t, int64_t,    \
                                         int64_t, int64_t, cudaStream_t);
TRIDENT_FOR_EACH_T(INSTANTIATE)
#undef INSTANTIATE

}  // namespace trident::cuda::engine_ops
