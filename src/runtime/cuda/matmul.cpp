#include "runtime/cuda/matmul.h"

#include <cstdint>
#include <utility>

#include "runtime/cuda/cuda_check.h"

namespace trident::cuda {

namespace {
cudaDataType_t cuda_type(ElemType t) { return t == ElemType::F32 ? CUDA_R_32F : CUDA_R_16BF; }

// Largest power of two (up to 256) dividing the address: views into flat buffers may be less
// aligned than cudaMalloc's 256 bytes, and cuBLASLt must be told so.
int alignment(const void* p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}
}  // namespace

Matmul::Matmul(cudaStream_t stream, size_t workspace_bytes) : stream_(stream), workspace_bytes_(workspace_bytes) {
  cublasCheck(cublasLtCreate(&handle_));
  cudaCheck(cudaMalloc(&workspace_, workspace_bytes_));
}

Matmul::~Matmul() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

Matmul::Plan& Matmul::plan(const Key& key, bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb, int ldd,
                           ElemType ab, ElemType d, bool has_bias, int align_a, int align_b, int align_d, int batch,
                           int64_t stride_a, int64_t stride_b, int64_t stride_d) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  Plan p;
  cublasCheck(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (has_bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bias_type = cuda_type(ab);
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    cublasCheck(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  cublasCheck(cublasLtMatrixLayoutCreate(&p.a, cuda_type(ab), trans_a ? k : m, trans_a ? m : k, lda));
  cublasCheck(cublasLtMatrixLayoutCreate(&p.b, cuda_type(ab), trans_b ? n : k, trans_b ? k : n, ldb));
  cublasCheck(cublasLtMatrixLayoutCreate(&p.d, cuda_type(d), m, n, ldd));
  if (batch > 1) {
    const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {{p.a, stride_a}, {p.b, stride_b}, {p.d, stride_d}};
    for (const auto& [layout, stride] : layouts) {
      cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof(stride)));
    }
  }

  cublasLtMatmulPreference_t pref;
  cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                   sizeof(workspace_bytes_)));
  const uint32_t aa = uint32_t(align_a), ab_ = uint32_t(align_b), ad = uint32_t(align_d);
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof(aa)));
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab_, sizeof(ab_)));
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof(ad)));
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof(ad)));
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found_count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found_count == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
    throw CudaError("cuBLASLt found no algorithm for D(" + std::to_string(m) + "x" + std::to_string(n) + ") = op(A)" +
                    (trans_a ? "^T" : "") + " . op(B)" + (trans_b ? "^T" : "") + " with k=" + std::to_string(k) +
                    ", lda=" + std::to_string(lda) + ", ldb=" + std::to_string(ldb) + ", ldd=" + std::to_string(ldd) +
                    (ab == ElemType::BF16 ? ", bf16 inputs" : ", fp32 inputs") + " (status " +
                    std::to_string(int(status)) + ")");
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void Matmul::gemm(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda, const void* B, int ldb,
                  void* D, int ldd, float alpha, float beta, ElemType ab, ElemType d, const void* bias) {
  const int align_a = alignment(A), align_b = alignment(B), align_d = alignment(D);
  Key key{trans_a, trans_b, m, n, k, lda, ldb, ldd, int(ab), int(d), bias != nullptr, align_a, align_b, align_d, 1, 0, 0, 0};
  Plan& p = plan(key, trans_a, trans_b, m, n, k, lda, ldb, ldd, ab, d, bias != nullptr, align_a, align_b, align_d, 1, 0,
                 0, 0);
  if (bias)
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  cublasCheck(cublasLtMatmul(handle_, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d, &p.algo, workspace_,
                             workspace_bytes_, stream_));
}

void Matmul::gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, const void* A, int lda, int64_t stride_a,
                          const void* B, int ldb, int64_t stride_b, void* D, int ldd, int64_t stride_d, int batch,
                          float alpha, float beta, ElemType ab, ElemType d) {
  const int align_a = alignment(A), align_b = alignment(B), align_d = alignment(D);
  Key key{trans_a, trans_b, m,       n,       k,       lda,   ldb,      ldd,      int(ab),
          int(d),  false,   align_a, align_b, align_d, batch, stride_a, stride_b, stride_d};
  Plan& p = plan(key, trans_a, trans_b, m, n, k, lda, ldb, ldd, ab, d, false, align_a, align_b, align_d, batch, stride_a,
                 stride_b, stride_d);
  cublasCheck(cublasLtMatmul(handle_, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d, &p.algo, workspace_,
                             workspace_bytes_, stream_));
}

void Matmul::gemm_rm_batched(bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda, int64_t stride_a,
                             const void* B, int ldb, int64_t stride_b, void* C, int ldc, int64_t stride_c, int batch,
                             float alpha, float beta, ElemType ab, ElemType c) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  gemm_batched(trans_b, trans_a, N, M, K, B, ldb, stride_b, A, lda, stride_a, C, ldc, stride_c, batch, alpha, beta, ab,
               c);
}

void Matmul::linear_forward(void* out, const void* inp, const void* weight, const void* bias, int N, int C, int OC,
                            ElemType t) {
  // Column-major: out^T(OC, N) = W^T... i.e. D = op(W)^T with W seen as (C, OC) column-major.
  gemm(true, false, OC, N, C, weight, C, inp, C, out, OC, 1.0f, 0.0f, t, t, bias);
}

void Matmul::linear_backward_input(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                                   ElemType t) {
  gemm(false, false, C, N, OC, weight, C, dout, OC, dinp, C, 1.0f, 0.0f, t, t);
}

void Matmul::linear_backward_weight(float* dweight, const void* dout, const void* inp, int N, int C, int OC,
                                    ElemType t) {
  gemm(false, true, C, OC, N, inp, C, dout, OC, dweight, C, 1.0f, 1.0f, t, ElemType::F32);
}

}  // namespace trident::cuda
