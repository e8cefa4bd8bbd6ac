// GPU kernels of Llama's blocks behind CudaKernels (semantics in runtime/kernels/ops.h): RMSNorm,
// SwiGLU, rotary embeddings. T is float or bf16; statistics and weight gradients are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace trident::cuda {

template <typename T>
void rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int N, int C, cudaStream_t s);
// dinp += ; dweight += .
template <typename T>
void rmsnorm_backward(T* dinp, float* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int N,
                      int C, cudaStream_t s);
template <typename T>
void swiglu_forward(T* out, const T* gate_up, size_t N, int F, cudaStream_t s);
template <typename T>
void swiglu_backward(T* dgate_up, const T* gate_up, const T* dout, size_t N, int F, cudaStream_t s);
// tokens = B*T rows of `row` elements; position of token i is i % Tn.
template <typename T>
void rope(T* x, size_t tokens, int Tn, int heads, int hd, size_t row, float theta, bool inverse, cudaStream_t s);

}  // namespace trident::cuda
