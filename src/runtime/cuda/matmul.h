// Matrix products through cuBLASLt, with the row-major conventions of the engine.
//
// Linear layers keep weights as (out_features, in_features) row-major, like PyTorch:
//   forward      out(N, OC)  = inp(N, C) . W(OC, C)^T (+ bias)
//   backward     dinp(N, C)  = dout(N, OC) . W(OC, C)
//                dW(OC, C)  += dout(N, OC)^T . inp(N, C)      (fp32, accumulated)
// In fp32 mode every operand is fp32 and the compute is plain fp32 (no TF32), for exactness
// tests; in bf16 mode A and B are bf16, accumulation is fp32, and D is bf16 or fp32.
// One workspace is allocated once; algorithm choices are cached per shape.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace trident::cuda {

enum class ElemType { F32, BF16 };

class Matmul {
 public:
  explicit Matmul(cudaStream_t stream, size_t workspace_bytes = size_t(32) << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // Column-major BLAS form: D(m, n) = alpha * op(A) . op(B) + beta * D, plus bias[m] per row of D
  // when bias is not null. A is (m, k) after op, B is (k, n) after op. ab is the type of A and B
  // (and of the bias), d the type of D.
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda, const void* B, int ldb, void* D,
            int ldd, float alpha, float beta, ElemType ab, ElemType d, const void* bias = nullptr);
  // `batch` independent products, operand i at A + i*stride_a (strides in elements), no bias.
  void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda, int64_t stride_a,
                    const void* B, int ldb, int64_t stride_b, void* D, int ldd, int64_t stride_d, int batch, float alpha,
                    float beta, ElemType ab, ElemType d);
  // Row-major form (what the kernels use): C(M, N) = alpha * op(A) . op(B) + beta * C, batched.
  void gemm_rm_batched(bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda, int64_t stride_a,
                       const void* B, int ldb, int64_t stride_b, void* C, int ldc, int64_t stride_c, int batch,
                       float alpha, float beta, ElemType ab, ElemType c);

  // The linear-layer helpers above, in the activation type t.
  void linear_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C, int OC,
                      ElemType t);
  void linear_backward_input(void* dinp, const void* dout, const void* weight, int N, int C, int OC, ElemType t);
  void linear_backward_weight(float* dweight, const void* dout, const void* inp, int N, int C, int OC, ElemType t);

 private:
  // Shape, types, bias, and the alignment of A, B and D (cuBLASLt picks kernels that rely on it).
  using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, int, bool, int, int, int, int, int64_t,
                         int64_t, int64_t>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(const Key& key, bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb, int ldd, ElemType ab,
             ElemType d, bool has_bias, int align_a, int align_b, int align_d, int batch, int64_t stride_a,
             int64_t stride_b, int64_t stride_d);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
};

}  // namespace trident::cuda
