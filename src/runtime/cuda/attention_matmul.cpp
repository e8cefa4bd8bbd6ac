#include "runtime/cuda/attention_matmul.h"

#include <cmath>
#include <type_traits>

#include "runtime/cuda/kernels.h"

namespace trident::cuda {

namespace {
template <typename T>
ElemType elem_type() {
  return std::is_same_v<T, float> ? ElemType::F32 : ElemType::BF16;
}
}  // namespace

template <typename T>
void attention_matmul_forward(Matmul& mm, T* out, T* probs, const T* qkv, AttentionMatmulScratch<T> scratch, int B,
                              int Tn, int NH, int HS, cudaStream_t s) {
  const int C = NH * HS, batch = B * NH;
  const size_t NC = size_t(B) * Tn * C;
  const int64_t th = int64_t(Tn) * HS, tt = int64_t(Tn) * Tn;
  const float scale = 1.0f / std::sqrt(float(HS));
  const ElemType e = elem_type<T>();
  T *q = scratch.heads, *k = q + NC, *v = k + NC, *o = v + NC;
  to_heads(q, qkv, 3 * C, B, Tn, NH, HS, s);
  to_heads(k, qkv + C, 3 * C, B, Tn, NH, HS, s);
  to_heads(v, qkv + 2 * C, 3 * C, B, Tn, NH, HS, s);
  // S = scale Q K^T (fp32), P = causal softmax(S), O = P V.
  mm.gemm_rm_batched(false, true, Tn, Tn, HS, q, HS, th, k, HS, th, scratch.scores, Tn, tt, batch, scale, 0.0f, e,
                     ElemType::F32);
  causal_softmax_forward(probs, scratch.scores, size_t(batch) * Tn, Tn, s);
  mm.gemm_rm_batched(false, false, Tn, HS, Tn, probs, Tn, tt, v, HS, th, o, HS, th, batch, 1.0f, 0.0f, e, e);
  from_heads(out, C, o, B, Tn, NH, HS, s);
}

template <typename T>
void attention_matmul_backward(Matmul& mm, T* dqkv, T* probs, const T* dout, const T* qkv,
                               AttentionMatmulScratch<T> scratch, int B, int Tn, int NH, int HS, cudaStream_t s) {
  const int C = NH * HS, batch = B * NH;
  const size_t NC = size_t(B) * Tn * C;
  const int64_t th = int64_t(Tn) * HS, tt = int64_t(Tn) * Tn;
  const float scale = 1.0f / std::sqrt(float(HS));
  const ElemType e = elem_type<T>();
  T *q = scratch.heads, *k = q + NC, *v = k + NC, *dO = v + NC, *dq = dO + NC, *dk = dq + NC, *dv = dk + NC;
  to_heads(q, qkv, 3 * C, B, Tn, NH, HS, s);
  to_heads(k, qkv + C, 3 * C, B, Tn, NH, HS, s);
  to_heads(v, qkv + 2 * C, 3 * C, B, Tn, NH, HS, s);
  to_heads(dO, dout, C, B, Tn, NH, HS, s);
  // dV = P^T dO (before P is overwritten), dP = dO V^T (fp32), then P <- dS = P (dP - rowsum(P dP)).
  mm.gemm_rm_batched(true, false, Tn, HS, Tn, probs, Tn, tt, dO, HS, th, dv, HS, th, batch, 1.0f, 0.0f, e, e);
  mm.gemm_rm_batched(false, true, Tn, Tn, HS, dO, HS, th, v, HS, th, scratch.scores, Tn, tt, batch, 1.0f, 0.0f, e,
                     ElemType::F32);
  causal_softmax_backward(probs, scratch.scores, size_t(batch) * Tn, Tn, s);
  // dQ = scale dS K, dK = scale dS^T Q.
  mm.gemm_rm_batched(false, false, Tn, HS, Tn, probs, Tn, tt, k, HS, th, dq, HS, th, batch, scale, 0.0f, e, e);
  mm.gemm_rm_batched(true, false, Tn, HS, Tn, probs, Tn, tt, q, HS, th, dk, HS, th, batch, scale, 0.0f, e, e);
  from_heads(dqkv, 3 * C, dq, B, Tn, NH, HS, s);
  from_heads(dqkv + C, 3 * C, dk, B, Tn, NH, HS, s);
  from_heads(dqkv + 2 * C, 3 * C, dv, B, Tn, NH, HS, s);
}

#define INSTANTIATE(T)                                                                                          \
  template void attention_matmul_forward<T>(Matmul&, T*, T*, const T*, AttentionMatmulScratch<T>, int, int, int, \
                                            int, cudaStream_t);                                                 \
  template void attention_matmul_backward<T>(Matmul&, T*, T*, const T*, const T*, AttentionMatmulScratch<T>, int, \
                                             int, int, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(bf16)
#undef INSTANTIATE

}  // namespace trident::cuda
