// The fp32 kernels that the engine's device-agnostic interface (runtime/kernels/ops.h) needs
// beyond kernels.h: vocabulary-sharded embedding and cross-entropy in steps (so tensor
// parallelism only adds all-reduces between them), deterministic embedding gradients, and
// AdamW/sum of squares with the interface's exact semantics. Launchers on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trident::cuda::engine_ops {

void add(float* out, const float* a, const float* b, size_t n, cudaStream_t s);
void add_inplace(float* out, const float* a, size_t n, cudaStream_t s);
void scale(float* x, float factor, size_t n, cudaStream_t s);
void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C, int64_t v_offset,
                       int64_t V_local, cudaStream_t s);
void add_positions(float* out, const float* wpe, int64_t B, int64_t T, int64_t C, cudaStream_t s);
// One thread per channel walks the tokens in order: deterministic, no atomics.
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                        int64_t v_offset, int64_t V_local, cudaStream_t s);
void positions_backward(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C, cudaStream_t s);
void xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V, cudaStream_t s);
void xent_sumexp_target(float* sumexp, float* target_logit, const float* logits, const float* row_max,
                        const int32_t* targets, int64_t N, int64_t V, int64_t v_offset, cudaStream_t s);
void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit, int64_t N,
                 cudaStream_t s);
void xent_backward_inplace(float* logits, const float* row_max, const float* sumexp, const int32_t* targets,
                           float dloss, int64_t N, int64_t V, int64_t v_offset, cudaStream_t s);
// result[0] = sum of x^2 accumulated in double (result zeroed here).
void sum_squares(double* result, const float* x, size_t n, cudaStream_t s);
void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, float grad_scale, int64_t t, cudaStream_t s);

}  // namespace trident::cuda::engine_ops
