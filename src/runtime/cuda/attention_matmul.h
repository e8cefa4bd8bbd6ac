// Causal attention through tensor-core matrix products (cuBLASLt, batched over batch x heads),
// CudaKernels' alternative (Attention::Matmul) to the fused flash kernel of kernels.h: scores S = scale Q K^T (fp32), a
// causal softmax kernel, then P V; P (B, NH, T, T) is kept for backward. Computes the full
// T x T products (twice the causal work) but on tensor cores, at the cost of O(T^2) memory.
//
// Layouts: qkv (B, T, 3C) as everywhere; heads are permuted to (B, NH, T, HS) for the products.
// Scratch (per call, reused): AttentionMatmulScratch. Backward destroys P (it becomes dS).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/cuda/matmul.h"

namespace trident::cuda {

// T-typed scratch of 7 * B*T*C elements (q, k, v, o/dO, dq, dk, dv) and fp32 scores B*NH*T*T.
template <typename T>
struct AttentionMatmulScratch {
  T* heads = nullptr;     // 7 * B*T*C
  float* scores = nullptr;  // B*NH*T*T
  static size_t heads_elems(int B, int Tn, int C) { return size_t(7) * B * Tn * C; }
  static size_t score_elems(int B, int Tn, int NH) { return size_t(B) * NH * Tn * Tn; }
};

template <typename T>
void attention_matmul_forward(Matmul& mm, T* out, T* probs, const T* qkv, AttentionMatmulScratch<T> scratch, int B,
                              int Tn, int NH, int HS, cudaStream_t s);
template <typename T>
void attention_matmul_backward(Matmul& mm, T* dqkv, T* probs, const T* dout, const T* qkv,
                               AttentionMatmulScratch<T> scratch, int B, int Tn, int NH, int HS, cudaStream_t s);

// The kernels it is made of (exposed for the GPU kernel check).
// dst (B, NH, T, HS) <- src rows of `src_stride` elements, head h at channels [h*HS, (h+1)*HS).
template <typename T>
void to_heads(T* dst, const T* src, int src_stride, int B, int Tn, int NH, int HS, cudaStream_t s);
// dst rows of `dst_stride` elements <- src (B, NH, T, HS).
template <typename T>
void from_heads(T* dst, int dst_stride, const T* src, int B, int Tn, int NH, int HS, cudaStream_t s);
// rows = B*NH*T rows of T scores; row r is query r % T: P = softmax over keys <= query, 0 above.
template <typename T>
void causal_softmax_forward(T* probs, const float* scores, size_t rows, int Tn, cudaStream_t s);
// In place: probs <- P * (dP - sum_j P_j dP_j) for keys <= query, 0 above.
template <typename T>
void causal_softmax_backward(T* probs, const float* dprobs, size_t rows, int Tn, cudaStream_t s);

}  // namespace trident::cuda
