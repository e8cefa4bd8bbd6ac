// Kernels: the device-agnostic operations the engine is made of (fp32, row-major).
//
// One implementation per device: CpuKernels (OpenBLAS sgemm + OpenMP, kernels/cpu/) and a CUDA
// one (cuBLAS + own kernels, runtime/cuda/). Every pointer is a pointer into the device's own
// memory (host memory for the CPU); sizes are element counts. The engine calls only this
// interface, so a layer written once runs on either device.
//
// Conventions (the same as PyTorch's nn.Linear and llm.c):
//  - a token-major activation is [N, C] with N = B*T tokens, C features, row stride = C unless
//    an ld argument says otherwise;
//  - a linear weight is [OC, IC] (out features x in features): out = in . W^T + b;
//  - backward functions ACCUMULATE into weight/bias gradients (+=), so gradient accumulation
//    over micro-batches needs no extra pass; input gradients are overwritten unless the name
//    says "accumulate";
//  - qkv of attention is [B, T, 3, nh, hd]: for each token the nh query heads, then the keys,
//    then the values. nh is the heads this device holds (heads / tp under tensor parallelism).
//  - vocabulary-sharded ops take [v_offset, v_offset + V_local) as this device's slice of the
//    vocabulary, so tensor-parallel embedding and cross-entropy are the same ops plus an
//    all-reduce that the caller places (Megatron style; see nn/gpt.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trident::kernels {

enum class Trans { N, T };

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual std::string device_name() const = 0;

  // ---- memory (device memory; the CPU returns 2 MiB-aligned, huge-page-advised, pre-faulted host memory)
  virtual float* alloc(size_t count) = 0;
  virtual void free(float* p, size_t count) = 0;
  virtual void zero(float* p, size_t count) = 0;
  virtual void copy(float* dst, const float* src, size_t count) = 0;         // device -> device
  virtual void to_host(float* host, const float* src, size_t count) = 0;     // device -> host
  virtual void from_host(float* dst, const float* host, size_t count) = 0;   // host -> device
  virtual void synchronize() = 0;

  // ---- matrix products
  // C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C, row-major, leading dimensions in elements.
  virtual void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc) = 0;
  // linear: out[N,OC] = inp[N,IC] . W[OC,IC]^T (+ bias[OC] when bias != nullptr).
  virtual void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                              int64_t IC, int64_t OC) = 0;
  // dinp[N,IC] = dout . W (overwritten; skipped when dinp == nullptr);
  // dweight[OC,IC] += dout^T . inp; dbias[OC] += column sums of dout (skipped when nullptr).
  virtual void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* weight, int64_t N, int64_t IC, int64_t OC) = 0;

  // ---- elementwise (fused where it saves a pass)
  virtual void add(float* out, const float* a, const float* b, size_t n) = 0;          // out = a + b
  virtual void add_inplace(float* out, const float* a, size_t n) = 0;                  // out += a
  virtual void scale(float* x, float s, size_t n) = 0;                                 // x *= s
  // GELU, tanh approximation (GPT-2; PyTorch approximate="tanh").
  virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;  // dinp = gelu'(inp)*dout

  // ---- LayerNorm over the last dimension C (eps 1e-5)
  // out, mean[N], rstd[N] written; mean/rstd are kept for the backward.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t C) = 0;
  // dinp += (accumulates: it is the residual stream's gradient); dweight += ; dbias += .
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, const float* mean, const float* rstd, int64_t N,
                                  int64_t C) = 0;

  // ---- causal self-attention, scale 1/sqrt(hd). Only the causal (lower) part of each score
  // matrix is computed and stored: probs holds, per (b, head), the rows of softmax(QK^T) up to
  // the diagonal, packed in blocks; attention_probs_size() says how many floats it needs.
  virtual size_t attention_probs_size(int64_t B, int64_t T, int64_t nh) const = 0;
  // out[B,T,nh*hd] from qkv[B,T,3,nh,hd].
  virtual void attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t nh,
                                 int64_t hd) = 0;
  // dqkv overwritten; scratch: attention_scratch_size() floats.
  virtual size_t attention_scratch_size(int64_t B, int64_t T, int64_t nh) const = 0;
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                  const float* probs, const float* out, int64_t B, int64_t T, int64_t nh,
                                  int64_t hd) = 0;

  // ---- embeddings
  // out[N,C] = wte[tok - v_offset] for tokens in [v_offset, v_offset+V_local), 0 for the others.
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C,
                                 int64_t v_offset, int64_t V_local) = 0;
  // out[b,t,:] += wpe[t,:]
  virtual void add_positions(float* out, const float* wpe, int64_t B, int64_t T, int64_t C) = 0;
  // dwte[tok - v_offset] += dout (tokens in the slice only); deterministic order.
  virtual void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                                  int64_t v_offset, int64_t V_local) = 0;
  // dwpe[t,:] += sum over b of dout[b,t,:]
  virtual void positions_backward(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C) = 0;

  // ---- softmax cross-entropy in three steps, so a vocabulary-parallel version only adds
  // all-reduces between them (max after step 1; sum of exps and target logit after step 2).
  // logits [N, V_local] (row stride V_local); targets are global token ids.
  virtual void xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local) = 0;
  // sumexp[N] = sum exp(logit - row_max); target_logit[N] = logit of the target when this slice holds it, else 0.
  virtual void xent_sumexp_target(float* sumexp, float* target_logit, const float* logits, const float* row_max,
                                  const int32_t* targets, int64_t N, int64_t V_local, int64_t v_offset) = 0;
  // losses[N] = log(sumexp) + row_max - target_logit
  virtual void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                           int64_t N) = 0;
  // In place: logits <- dloss * (softmax - onehot(target)), softmax = exp(logit - max)/sumexp.
  virtual void xent_backward_inplace(float* logits, const float* row_max, const float* sumexp,
                                     const int32_t* targets, float dloss, int64_t N, int64_t V_local,
                                     int64_t v_offset) = 0;

  // ---- optimizer
  // Sum of squares (double accumulation), returned to the host.
  virtual double sum_squares(const float* x, size_t n) = 0;
  // AdamW on n elements: g = grad*grad_scale; m,v moments; bias-corrected with step t (1-based);
  // param -= lr * (mhat/(sqrt(vhat)+eps) + weight_decay*param).
  virtual void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float grad_scale, int64_t t) = 0;
};

// The CPU implementation (OpenBLAS + OpenMP). threads <= 0 means all cores.
std::unique_ptr<Kernels> make_cpu_kernels(int threads = 0);

}  // namespace trident::kernels
