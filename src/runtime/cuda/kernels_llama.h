// GPU kernels of Llama's blocks behind CudaKernels (semantics in runtime/kernels/ops.h): RMSNorm,
// SwiGLU, rotary embeddings, grouped-query attention's kv-head repeat and its gradient. T is float or bf16; statistics and weight gradients are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/kernels/rope_freq.h"

namespace trident::cuda {

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps, cudaStream_t s);
// dinp += ; dweight += .
template <typename T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, cudaStream_t s);
// QK-norm: RMSNorm over each of `heads` heads of hd values at the start of N rows of `row`
// elements, in place; the input copied to saved [N heads, hd], rstd [N heads].
template <typename T>
void head_rmsnorm_forward(T* x, T* saved, float* rstd, const T* weight, int N, int heads, int hd, size_t row, float eps,
                          cudaStream_t s);
// dx (strided as x) overwritten with the input gradient; dweight += .
template <typename T>
void head_rmsnorm_backward(T* dx, float* dweight, const T* saved, const T* weight, const float* rstd, int N, int heads,
                           int hd, size_t row, cudaStream_t s);
template <typename T>
void swiglu_forward(T* out, const T* gate_up, size_t N, int F, cudaStream_t s);
template <typename T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, size_t N, int F, cudaStream_t s);
// GPT-OSS's clamped unit (kernels::Kernels::swiglu_oss_forward).
template <typename T>
void swiglu_oss_forward(T* out, const T* gate_up, size_t N, int F, float limit, cudaStream_t s);
template <typename T>
void swiglu_oss_backward(T* dgate_up, const T* gate_up, const T* dout, size_t N, int F, float limit, cudaStream_t s);
// tokens = B*T rows of `row` elements; position of token i is i % Tn.
template <typename T>
void rope(T* x, size_t tokens, int Tn, int heads, int hd, size_t row, const kernels::RopeFreq& freq, bool inverse,
          cudaStream_t s);

// Multi-head latent attention's strided head blocks (semantics: Kernels::copy_heads); src nullptr
// writes zeros.
template <typename T>
void copy_heads(T* dst, size_t dst_row, size_t dst_head, const T* src, size_t src_row, size_t src_head, size_t rows,
                int heads, int cols, bool accumulate, float scale, cudaStream_t s);

// qkv [N, 3, nh, hd] = [q | each kv head repeated for its nh / nkv query heads] from q [N, nh hd]
// and kv [N, 2 nkv hd] (key heads, then value heads).
template <typename T>
void gqa_expand(T* qkv, const T* q, const T* kv, size_t N, int nh, int nkv, int hd, cudaStream_t s);
// The conjugate: dq, dkv overwritten; a kv head's gradient sums its group's heads in head order.
template <typename T>
void gqa_reduce(T* dq, T* dkv, const T* dqkv, size_t N, int nh, int nkv, int hd, cudaStream_t s);

}  // namespace trident::cuda
