// GPU kernels of the GPT engine, one launcher per operation, raw pointers and explicit sizes.
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

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
template <typename T>
void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn, int C, cudaStream_t s);
// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum over b of dout[b,t,:]
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn, int C,
                        cudaStream_t s);

// out = (inp - mean) * rstd * weight + bias per row; saves mean and rstd (fp32) for backward.
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                       cudaStream_t s);
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
// multiple of 32 and at most 128.
template <typename T>
void attention_forward(T* out, float* lse, const T* qkv, int B, int Tn, int NH, int HS, cudaStream_t s);
// dqkv (B, T, 3C) = gradient of the attention wrt qkv. delta (B, NH, T) is scratch.
template <typename T>
void attention_backward(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                        int Tn, int NH, int HS, cudaStream_t s);

// Fused softmax + cross-entropy over rows of Vp logits of which the first V are real:
// losses[i] = logsumexp(row) - row[target]; then the row is overwritten with its gradient
// (softmax - onehot(target)) * dloss, and padded columns with 0.
template <typename T>
void softmax_cross_entropy(float* losses, T* logits, const int* targets, int N, int V, int Vp, float dloss,
                           cudaStream_t s);

// norm_sq[0] += sum of x[i]^2 (norm_sq must be zeroed by the caller first).
void sum_of_squares(float* norm_sq, const float* x, size_t n, cudaStream_t s);

// AdamW exactly as torch.optim.AdamW, on fp32 master weights, after clipping the gradient to
// a global norm of max_norm (scale = min(1, max_norm / (sqrt(norm_sq) + 1e-6)); max_norm <= 0
// turns clipping off). Writes the updated master weight and its copy in T.
template <typename T>
void adamw_update(float* master, T* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step, const float* norm_sq, float max_norm,
                  cudaStream_t s);

// out[i] = T(in[i]) and back.
template <typename T>
void cast_from_float(T* out, const float* in, size_t n, cudaStream_t s);
template <typename T>
void cast_to_float(float* out, const T* in, size_t n, cudaStream_t s);

}  // namespace trident::cuda
