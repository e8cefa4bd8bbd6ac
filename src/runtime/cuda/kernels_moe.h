// GPU kernels of the mixture-of-experts row moves behind CudaKernels (semantics in
// runtime/kernels/ops.h: gather_rows, combine_rows, gather_row_dots). T is float or bf16; the
// sums accumulate in fp32, dots are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trident::cuda {

template <typename T>
void gather_rows(T* dst, const T* src, const int32_t* rows, const float* scale, int n, int C, cudaStream_t s);
template <typename T>
void combine_rows(T* out, const T* src, const int32_t* pos, const float* w, int N, int k, int C, cudaStream_t s);
template <typename T>
void gather_row_dots(float* dots, const T* a, const int32_t* rows, const T* b, int n, int C, cudaStream_t s);

}  // namespace trident::cuda
