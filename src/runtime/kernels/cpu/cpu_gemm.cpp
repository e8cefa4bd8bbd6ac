// Matrix products: OpenBLAS sgemm, one call per OpenMP thread on a slice of C.
//
// C is split along M (rows) when it is tall enough, else along N; each slice's size is a
// multiple of 16 so every thread runs full vector tiles. Small products run on one thread.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace trident::kernels {

namespace {
CBLAS_TRANSPOSE cb(Trans t) { return t == Trans::N ? CblasNoTrans : CblasTrans; }
}  // namespace

void CpuKernels::gemm_serial(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                             int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}

void CpuKernels::gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int nt = omp_in_parallel() ? 1 : threads_;
  const double work = double(M) * double(N) * double(K);
  if (nt == 1 || work < 2.0e6) {
    gemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_m = M >= N || M >= 64 * nt;
  const int64_t extent = split_m ? M : N;
  int64_t chunk = (extent + nt - 1) / nt;
  chunk = (chunk + 15) / 16 * 16;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t lo = std::min(extent, t * chunk), hi = std::min(extent, lo + chunk);
    if (hi > lo) {
      if (split_m) {
        const float* a = ta == Trans::N ? A + lo * lda : A + lo;
        gemm_serial(ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
      } else {
        const float* b = tb == Trans::N ? B + lo : B + lo * ldb;
        gemm_serial(ta, tb, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
      }
    }
  }
}

void CpuKernels::linear_forward(const Tensor& out_t, const Tensor& inp_t, const Tensor& weight_t,
                                const Tensor& bias_t, int64_t N, int64_t IC, int64_t OC) {
  float* out = f32_data(out_t, "linear_forward", size_t(N * OC));
  const float* inp = f32_data(inp_t, "linear_forward", size_t(N * IC));
  const float* weight = f32_data(weight_t, "linear_forward", size_t(OC * IC));
  const float* bias = f32_data(bias_t, "linear_forward", bias_t.empty() ? 0 : size_t(OC));
  if (bias) {
    // Start from the bias in each row, then accumulate the product into it (beta = 1).
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      float* o = out + i * OC;
      for (int64_t j = 0; j < OC; ++j) o[j] = bias[j];
    }
  }
  gemm(Trans::N, Trans::T, N, OC, IC, 1.0f, inp, IC, weight, IC, bias ? 1.0f : 0.0f, out, OC);
}

void CpuKernels::linear_backward(const Tensor& dinp_t, float* dweight, float* dbias, const Tensor& dout_t,
                                 const Tensor& inp_t, const Tensor& weight_t, int64_t N, int64_t IC, int64_t OC) {
  float* dinp = f32_data(dinp_t, "linear_backward", dinp_t.empty() ? 0 : size_t(N * IC));
  const float* dout = f32_data(dout_t, "linear_backward", size_t(N * OC));
  const float* inp = f32_data(inp_t, "linear_backward", size_t(N * IC));
  const float* weight = f32_data(weight_t, "linear_backward", size_t(OC * IC));
  if (dinp) gemm(Trans::N, Trans::N, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
  if (dweight) gemm(Trans::T, Trans::N, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
  if (dbias) {
    // Column sums: each thread owns a range of columns, so the order of additions is fixed.
#pragma omp parallel
    {
      const int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (OC + nt - 1) / nt;
      chunk = (chunk + 15) / 16 * 16;
      const int64_t lo = std::min(OC, t * chunk), hi = std::min(OC, lo + chunk);
      for (int64_t i = 0; i < N; ++i) {
        const float* d = dout + i * OC;
        for (int64_t j = lo; j < hi; ++j) dbias[j] += d[j];
      }
    }
  }
}

}  // namespace trident::kernels
