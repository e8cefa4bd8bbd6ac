// The kernels behind CudaKernels that kernels.h does not have: vocabulary-sharded embedding and
// cross-entropy in steps (so tensor parallelism only adds all-reduces between them),
// deterministic embedding gradients, and AdamW / sum of squares with the interface's exact
// semantics (runtime/kernels/ops.h). T is the activation type (float or bf16); gradients,
// statistics and optimizer state are fp32. Launchers on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trident::cuda::engine_ops {

void scale(float* x, float factor, size_t n, cudaStream_t s);
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t N, int64_t C, int64_t v_offset,
                       int64_t V_local, cudaStream_t s);
template <typename T>
void add_positions(T* out, const T* wpe, int64_t B, int64_t T_, int64_t C, cudaStream_t s);
// One thread per channel walks the tokens in order: deterministic, no atomics.
template <typename T>
void embedding_backward(float* dwte, const T* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_offset,
                        int64_t V_local, cudaStream_t s);
template <typename T>
void positions_backward(float* dwpe, const T* dout, int64_t B, int64_t T_, int64_t C, cudaStream_t s);
// Columns [V_valid, V) of each row are vocabulary padding: out of the max and the sum, zero gradient.
template <typename T>
void xent_row_max(float* row_max, const T* logits, int64_t N, int64_t V, int64_t V_valid, cudaStream_t s);
template <typename T>
void xent_sumexp_target(float* sumexp, float* target_logit, const T* logits, const float* row_max,
                        const int32_t* targets, int64_t N, int64_t V, int64_t V_valid, int64_t v_offset, cudaStream_t s);
void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit, int64_t N,
                 cudaStream_t s);
template <typename T>
void xent_backward_inplace(T* logits, const float* row_max, const float* sumexp, const int32_t* targets, float dloss,
                           int64_t N, int64_t V, int64_t V_valid, int64_t v_offset, cudaStream_t s);
// result[0] = sum of x^2 accumulated in double (result zeroed here).
void sum_squares(double* result, const float* x, size_t n, cudaStream_t s);
void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, float grad_scale, int64_t t, cudaStream_t s);

}  // namespace trident::cuda::engine_ops
