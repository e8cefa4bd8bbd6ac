// GPU kernels of the GPT engine that exist for both activation types, one launcher per
// operation, raw pointers and explicit sizes (kernels_engine.h has the vocabulary-sharded and
// optimizer ones; CudaKernels picks the instance from each Tensor's dtype).
//
// T is the activation/weight type: float (fp32 mode, for exactness tests) or __nv_bfloat16
// (mixed precision). Every reduction accumulates in fp32; gradients of parameters, master
// weights and optimizer state are always fp32. Shapes are row-major: N = B*T rows of C
// channels. "+=" in a comment means the launcher accumulates into the output (gradient
// accumulation over micro-batches), otherwise it overwrites.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace trident::cuda {

using bf16 = __nv_bfloat16;

// out = (inp - mean) * rstd * weight + bias per row; saves mean and rstd (fp32) for backward.
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       float eps, cudaStream_t s);
// dinp += d(LN)/d(inp) . dout; dweight += sum_rows dout*xhat; dbias += sum_rows dout.
template <typename T>
void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t s);

// out = a + b (the residual stream).
template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n, cudaStream_t s);

// GELU, tanh approximation (GPT-2's): out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n, cudaStream_t s);
// dinp = gelu'(inp) * dout; dinp may be the same buffer as dout.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t s);

// dbias[o] += sum over the N rows of dout[:, o].
template <typename T>
void bias_backward(float* dbias, const T* dout, int N, int OC, cudaStream_t s);

// Fused causal self-attention, flash style: scores are never stored. qkv is (B, T, 3C) with
// q, k, v side by side and head h at channels [h*HS, (h+1)*HS) of each; out is (B, T, C);
// lse (B, NH, T) keeps each row's log-sum-exp of the scaled scores for backward. HS must be a
// multiple of 32 and at most 128. window > 0: query t sees keys t - window < j <= t; sinks (NH,
// or nullptr): one logit per head in each row's denominator (GPT-OSS; ops.h's AttentionMask).
template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int Tn, int NH, int HS, int window, const T* sinks,
                       cudaStream_t s);
// dqkv (B, T, 3C) = gradient of the attention wrt qkv. delta (B, NH, T) is scratch. With sinks,
// fp32 dsinks (NH) += their gradient.
template <typename T>
void attention_backward(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                        int Tn, int NH, int HS, int window, const T* sinks, float* dsinks, cudaStream_t s);

// out[i] = T(in[i]) and back.
template <typename T>
void cast_from_float(T* out, const float* in, size_t n, cudaStream_t s);
template <typename T>
void cast_to_float(float* out, const T* in, size_t n, cudaStream_t s);

}  // namespace trident::cuda
