// Kernels: the device-agnostic operations the engine is made of (row-major).
//
// One implementation per device: CpuKernels (OpenBLAS sgemm + OpenMP, kernels/cpu/) and
// CudaKernels (cuBLASLt + own kernels, runtime/cuda/). The engine calls only this interface, so
// a layer written once runs on either device.
//
// Tensors carry their element type: activations and the compute copy of the weights are a
// Tensor {pointer, dtype, element count}, so one GptStage runs in fp32 everywhere and in bf16
// where the backend supports() it (CUDA). Master weights, weight/bias gradients, optimizer
// moments, LayerNorm statistics and loss scalars are always fp32 (float*), as Megatron and
// llm.c keep them. A backend checks the dtype once per call (never per element) and refuses a
// type it cannot compute with an error naming the op and the type. Pointers are the device's
// own memory (host memory for the CPU); sizes are element counts.
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
//  - an optional Tensor argument (bias, dinp) is skipped when empty().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/kernels/rope_freq.h"

namespace trident::kernels {

enum class Trans { N, T };

// Element types of kernel tensors: the communicator's (F32 and BF16 are the ones kernels use).
using DType = comm::DType;

// A typed view of device memory.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  size_t count = 0;  // elements

  Tensor() = default;
  Tensor(void* d, DType t, size_t n) : data(d), dtype(t), count(n) {}
  Tensor(float* d, size_t n) : data(d), count(n) {}
  Tensor(const float* d, size_t n) : data(const_cast<float*>(d)), count(n) {}
  bool empty() const { return data == nullptr; }
  size_t bytes() const { return count * comm::dtype_size(dtype); }
  // Elements [offset, offset + n) of this tensor, same type.
  Tensor slice(size_t offset, size_t n) const {
    return {data ? static_cast<char*>(data) + offset * comm::dtype_size(dtype) : nullptr, dtype, n};
  }
};

// The fp32 data of t (nullptr when empty); throws std::invalid_argument naming `op` and the type
// when t holds another type or fewer than `need` elements. What an fp32-only backend calls once
// per op.
float* f32_data(const Tensor& t, const char* op, size_t need = 0);

// GPT-OSS's attention (the attention ops below): a sliding window, query t seeing keys
// t - window < j <= t (window 0: all of 0..t; Hugging Face's sliding_window), and sinks, one
// logit per head (sinks[nh], the compute type; empty: none) whose exp joins each row's softmax
// denominator as a key without a value (modeling_gpt_oss: the sink concatenated to the scores,
// dropped after the softmax).
struct AttentionMask {
  int64_t window = 0;
  Tensor sinks;
  bool plain() const { return window <= 0 && sinks.empty(); }
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual std::string device_name() const = 0;
  // Whether this backend computes in `t` (CPU: F32 only; CUDA: F32 and BF16). GptStage and the
  // run check ask before building a model in that type.
  virtual bool supports(DType t) const = 0;

  // ---- memory (device memory; the CPU returns 2 MiB-aligned, huge-page-advised, pre-faulted host memory)
  virtual float* alloc(size_t count) = 0;
  virtual void free(float* p, size_t count) = 0;
  virtual void zero(float* p, size_t count) = 0;
  virtual void copy(float* dst, const float* src, size_t count) = 0;         // device -> device
  virtual void to_host(float* host, const float* src, size_t count) = 0;     // device -> host
  virtual void from_host(float* dst, const float* host, size_t count) = 0;   // host -> device
  virtual void synchronize() = 0;
  // dst = src converted to dst's type (a plain copy when the types agree); count = dst.count.
  virtual void convert(const Tensor& dst, const Tensor& src) = 0;

  // ---- matrix products (gemm is the fp32 product, e.g. for peak-rate measurements)
  // C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C, row-major, leading dimensions in elements.
  virtual void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc) = 0;
  // linear: out[N,OC] = inp[N,IC] . W[OC,IC]^T (+ bias[OC] when bias != nullptr).
  // out, inp, weight and bias share one type.
  virtual void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                              int64_t N, int64_t IC, int64_t OC) = 0;
  // dinp[N,IC] = dout . W (overwritten; skipped when empty); fp32 dweight[OC,IC] += dout^T . inp;
  // fp32 dbias[OC] += column sums of dout (skipped when nullptr).
  virtual void linear_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout,
                               const Tensor& inp, const Tensor& weight, int64_t N, int64_t IC, int64_t OC) = 0;

  // ---- elementwise (fused where it saves a pass)
  // n = out.count elements; operands of one type.
  virtual void add(const Tensor& out, const Tensor& a, const Tensor& b) = 0;  // out = a + b
  virtual void add_inplace(const Tensor& out, const Tensor& a) = 0;           // out += a
  virtual void scale(float* x, float s, size_t n) = 0;                        // x *= s (fp32)
  // GELU, tanh approximation (GPT-2; PyTorch approximate="tanh").
  virtual void gelu_forward(const Tensor& out, const Tensor& inp) = 0;
  virtual void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout) = 0;  // dinp = gelu'(inp)*dout

  // ---- LayerNorm over the last dimension C (eps: the model's norm epsilon, 1e-5 by default)
  // out, mean[N], rstd[N] (fp32) written; mean/rstd are kept for the backward.
  virtual void layernorm_forward(const Tensor& out, float* mean, float* rstd, const Tensor& inp,
                                 const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, float eps) = 0;
  // dinp += (accumulates: it is the residual stream's gradient); fp32 dweight += ; dbias += .
  virtual void layernorm_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout,
                                  const Tensor& inp, const Tensor& weight, const float* mean, const float* rstd,
                                  int64_t N, int64_t C) = 0;

  // ---- Llama blocks: RMSNorm, SwiGLU, rotary position embeddings
  // RMSNorm over the last dimension C: out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps);
  // rstd[N] (fp32) kept.
  virtual void rmsnorm_forward(const Tensor& out, float* rstd, const Tensor& inp, const Tensor& weight, int64_t N,
                               int64_t C, float eps) = 0;
  // dinp += (the residual stream's gradient); fp32 dweight += .
  virtual void rmsnorm_backward(const Tensor& dinp, float* dweight, const Tensor& dout, const Tensor& inp,
                                const Tensor& weight, const float* rstd, int64_t N, int64_t C) = 0;
  // QK-norm (Qwen3, OLMo 2): RMSNorm over each of `heads` heads of hd values at the start of each
  // of N rows of `row` elements, one weight[hd] for all heads, in place. The input is copied to
  // saved [N, heads hd] and rstd [N heads] (fp32) written, for the backward.
  virtual void head_rmsnorm_forward(const Tensor& x, const Tensor& saved, float* rstd, const Tensor& weight, int64_t N,
                                    int64_t heads, int64_t hd, int64_t row, float eps) = 0;
  // In place: dx (the output gradient, same strided layout) <- the input gradient; fp32 dweight[hd] += .
  virtual void head_rmsnorm_backward(const Tensor& dx, float* dweight, const Tensor& saved, const Tensor& weight,
                                     const float* rstd, int64_t N, int64_t heads, int64_t hd, int64_t row) = 0;
  // gate_up [N, 2F]: each row holds F gate values then F up values; out [N, F] = silu(gate) * up.
  virtual void swiglu_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F) = 0;
  // dgate_up [N, 2F] overwritten from dout [N, F].
  virtual void swiglu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                               int64_t F) = 0;
  // GPT-OSS's gated unit (modeling_gpt_oss's GptOssExperts, Megatron's quick-GEGLU with
  // --glu-linear-offset 1 and --activation-func-clamp-value limit), same layout: g = min(gate, limit),
  // u = clamp(up, -limit, limit), out = (u + 1) g sigmoid(1.702 g). Its backward passes no gradient
  // where a value was clamped (torch.clamp's: bounds inclusive).
  virtual void swiglu_oss_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F, float limit) = 0;
  virtual void swiglu_oss_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                                   int64_t F, float limit) = 0;
  // Rotary embeddings in place on `heads` heads of hd values at the start of each token's row of
  // `row` elements (x points at the first head): pair (2i, 2i+1) of the token at position t is
  // rotated by the angle t * theta^(-2i/hd) (Meta's Llama convention; Llama 3.1's scaling
  // rewrites the frequencies, see rope_freq.h). inverse = true rotates back: the backward of the
  // rotation.
  virtual void rope(const Tensor& x, int64_t B, int64_t T, int64_t heads, int64_t hd, int64_t row, const RopeFreq& freq,
                    bool inverse) = 0;

  // ---- multi-head latent attention (DeepSeek-V2/V3): blocks of heads moved between strided
  // layouts. For r < rows, h < heads, c < cols: dst[r dst_row + h dst_head + c] gets
  // src[r src_row + h src_head + c]; dst_head 0 sums the heads into one block (in head order:
  // deterministic), src_head 0 broadcasts one block to every head, an empty src writes zeros.
  // accumulate adds to what dst holds instead of overwriting it; what is copied is multiplied by
  // scale first (MLA's queries by YaRN's softmax-scale multiplier).
  virtual void copy_heads(const Tensor& dst, int64_t dst_row, int64_t dst_head, const Tensor& src, int64_t src_row,
                          int64_t src_head, int64_t rows, int64_t heads, int64_t cols, bool accumulate = false,
                          float scale = 1.0f) = 0;

  // ---- grouped-query attention: the attention ops read qkv[B, T, 3, nh, hd]; a model with nkv < nh
  // key/value heads (nh % nkv == 0) repeats each kv head for its nh/nkv consecutive query heads.
  // A backend without these keeps the defaults, which refuse by name (supports_gqa() says so).
  virtual bool supports_gqa() const { return false; }
  // qkv = [q | repeated keys | repeated values] from q[N, nh*hd] and kv[N, 2*nkv*hd] (nkv key
  // heads, then nkv value heads).
  virtual void gqa_expand(const Tensor& qkv, const Tensor& q, const Tensor& kv, int64_t N, int64_t nh, int64_t nkv,
                          int64_t hd);
  // The conjugate: dq, dkv overwritten from dqkv, the repeated heads' gradients summed.
  virtual void gqa_reduce(const Tensor& dq, const Tensor& dkv, const Tensor& dqkv, int64_t N, int64_t nh, int64_t nkv,
                          int64_t hd);

  // ---- causal self-attention, scale 1/sqrt(hd). Only the causal (lower) part of each score
  // matrix is computed and stored: probs holds, per (b, head), the rows of softmax(QK^T) up to
  // the diagonal, packed in blocks; attention_probs_size() says how many floats it needs.
  // GPT-OSS's attention: an AttentionMask (above the class).
  using AttentionMask = kernels::AttentionMask;
  virtual size_t attention_probs_size(int64_t B, int64_t T, int64_t nh) const = 0;
  // out[B,T,nh*hd] from qkv[B,T,3,nh,hd].
  virtual void attention_forward(const Tensor& out, float* probs, const Tensor& qkv, int64_t B, int64_t T,
                                 int64_t nh, int64_t hd, const AttentionMask& mask = {}) = 0;
  // dqkv overwritten; scratch: attention_scratch_size() floats; probs may be overwritten (it is
  // not read again after the backward). With sinks, fp32 dsinks[nh] += their gradient
  // (-sum over rows of p_sink rowsum(dO * O)).
  virtual size_t attention_scratch_size(int64_t B, int64_t T, int64_t nh) const = 0;
  virtual void attention_backward(const Tensor& dqkv, float* scratch, const Tensor& dout, const Tensor& qkv,
                                  const float* probs, const Tensor& out, int64_t B, int64_t T, int64_t nh,
                                  int64_t hd, const AttentionMask& mask = {}, float* dsinks = nullptr) = 0;

  // ---- ring attention (context parallel): a rank's queries against one block of keys and
  // values at a time, merged by the online softmax (log-sum-exp), so no score matrix outlives a
  // block; the backward recomputes each block's probabilities from the kept lse. Queries come
  // from qkv [B, T, 3, nh, hd]; a block's keys and values are packed kv [B, T, 2, nkv, hd] (nkv
  // key heads then nkv value heads; query head h reads kv head h / (nh / nkv)). The pair is the
  // query rows [q0, q0 + nq) of every sequence against its key rows [k0, k0 + nk): all of them,
  // or (causal) query row t against the key rows k0 .. t, which needs k0 <= q0 and
  // q0 + nq <= k0 + nk (rows count in the same local sequence). lse is [B, nh, T] (fp32).
  // A backend without these keeps the defaults, which refuse by name.
  // A sliding window (window > 0) masks, besides, the keys at whole-sequence positions
  // pos(key) <= pos(query) - window, where local row t sits at position first[t / chunk] +
  // t % chunk (two chunks: context parallel's load-balanced split; chunk 0: position t).
  struct AttentionBlock {
    int64_t B = 1, T = 0, nh = 1, nkv = 1, hd = 1;
    int64_t q0 = 0, nq = 0, k0 = 0, nk = 0;
    bool causal = false;
    int64_t window = 0, chunk = 0, q_first[2] = {0, 0}, k_first[2] = {0, 0};
    int64_t q_position(int64_t t) const { return chunk > 0 ? q_first[t / chunk] + t % chunk : t; }
    int64_t k_position(int64_t t) const { return chunk > 0 ? k_first[t / chunk] + t % chunk : t; }
  };
  virtual bool supports_ring_attention() const { return false; }
  // kv = the keys and values of qkv's heads 0, g, 2g, ... (g = nh / nkv: one per kv head).
  virtual void ring_kv_pack(const Tensor& kv, const Tensor& qkv, int64_t N, int64_t nh, int64_t nkv, int64_t hd);
  // dqkv's key and value slots from dkv: head h * g gets kv head h's gradient, the other heads
  // of its group zero (gqa_reduce then sums them to exactly dkv); the query slots are untouched.
  virtual void ring_kv_unpack(const Tensor& dqkv, const Tensor& dkv, int64_t N, int64_t nh, int64_t nkv, int64_t hd);
  // Floats of the scratch the block ops take, for T rows per sequence.
  virtual size_t ring_attention_scratch_size(int64_t T, int64_t hd) const;
  // out [B, T, nh*hd] and lse of the block's query rows: written (first) or merged with what
  // they hold.
  virtual void attention_block_forward(const Tensor& out, float* lse, const Tensor& qkv, const Tensor& kv,
                                       const AttentionBlock& blk, bool first, float* scratch);
  // dqkv's query slots (+=) and dkv (+=) from the block, given the merged out and lse.
  virtual void attention_block_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                                        const Tensor& kv, const Tensor& out, const float* lse,
                                        const AttentionBlock& blk, float* scratch);
  // Sinks (above) after the blocks: each query row's lse' = log(exp(lse) + exp(sinks[h])) and its
  // out scaled by exp(lse - lse'): the sink counted once per row of the whole softmax.
  virtual void attention_sink_merge(const Tensor& out, float* lse, const Tensor& sinks, int64_t B, int64_t T,
                                    int64_t nh, int64_t hd);
  // fp32 dsinks[nh] += -sum over rows of exp(sinks[h] - lse) rowsum(dout * out) (lse with the sink).
  virtual void attention_sink_backward(float* dsinks, const Tensor& dout, const Tensor& out, const float* lse,
                                       const Tensor& sinks, int64_t B, int64_t T, int64_t nh, int64_t hd);
  // rope (above) on T consecutive tokens of one sequence at positions first_position ... (a
  // context-parallel chunk).
  virtual void rope_at(const Tensor& x, int64_t T, int64_t heads, int64_t hd, int64_t row, const RopeFreq& freq, bool inverse,
                       int64_t first_position);

  // ---- mixture of experts: rows moved between token order and expert order (the dispatch and
  // combine of a MoE layer). Row indices are int32 in device memory; scales and weights fp32.
  // dst[i, :] = src[rows[i], :] * (scale ? scale[i] : 1) for i < n (overwritten).
  virtual void gather_rows(const Tensor& dst, const Tensor& src, const int32_t* rows, const float* scale, int64_t n,
                           int64_t C) = 0;
  // out[t, :] = sum over j < k with pos[t k + j] >= 0 of (w ? w[t k + j] : 1) * src[pos[t k + j], :],
  // for t < N (overwritten; 0 for a token with no kept slot). Deterministic: j in order.
  virtual void combine_rows(const Tensor& out, const Tensor& src, const int32_t* pos, const float* w, int64_t N,
                            int64_t k, int64_t C) = 0;
  // dots[i] = sum_c a[rows[i], c] * b[i, c] for i < n (fp32).
  virtual void gather_row_dots(float* dots, const Tensor& a, const int32_t* rows, const Tensor& b, int64_t n,
                               int64_t C) = 0;

  // ---- embeddings
  // out[N,C] = wte[tok - v_offset] for tokens in [v_offset, v_offset+V_local), 0 for the others.
  virtual void embedding_forward(const Tensor& out, const int32_t* tokens, const Tensor& wte, int64_t N,
                                 int64_t C, int64_t v_offset, int64_t V_local) = 0;
  // out[b,t,:] += wpe[t,:]
  virtual void add_positions(const Tensor& out, const Tensor& wpe, int64_t B, int64_t T, int64_t C) = 0;
  // fp32 dwte[tok - v_offset] += dout (tokens in the slice only); deterministic order.
  virtual void embedding_backward(float* dwte, const Tensor& dout, const int32_t* tokens, int64_t N, int64_t C,
                                  int64_t v_offset, int64_t V_local) = 0;
  // fp32 dwpe[t,:] += sum over b of dout[b,t,:]
  virtual void positions_backward(float* dwpe, const Tensor& dout, int64_t B, int64_t T, int64_t C) = 0;

  // ---- softmax cross-entropy in three steps, so a vocabulary-parallel version only adds
  // all-reduces between them (max after step 1; sum of exps and target logit after step 2).
  // logits [N, V_local] (row stride V_local, the compute type); targets are global token ids;
  // the per-row statistics are fp32. Only the first V_valid columns are tokens: the rest are
  // vocabulary padding, left out of the max and the sum (no probability) and given a zero
  // gradient. A slice with V_valid = 0 has row_max -inf and sumexp 0.
  virtual void xent_row_max(float* row_max, const Tensor& logits, int64_t N, int64_t V_local, int64_t V_valid) = 0;
  // sumexp[N] = sum exp(logit - row_max); target_logit[N] = logit of the target when this slice holds it, else 0.
  virtual void xent_sumexp_target(float* sumexp, float* target_logit, const Tensor& logits, const float* row_max,
                                  const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                                  int64_t v_offset) = 0;
  // losses[N] = log(sumexp) + row_max - target_logit
  virtual void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                           int64_t N) = 0;
  // In place: logits <- dloss * (softmax - onehot(target)), softmax = exp(logit - max)/sumexp;
  // the padding columns [V_valid, V_local) <- 0.
  virtual void xent_backward_inplace(const Tensor& logits, const float* row_max, const float* sumexp,
                                     const int32_t* targets, float dloss, int64_t N, int64_t V_local, int64_t V_valid,
                                     int64_t v_offset) = 0;

  // ---- optimizer (fp32 master weights, gradients and moments)
  // Sum of squares (double accumulation), returned to the host.
  virtual double sum_squares(const float* x, size_t n) = 0;
  // AdamW on n elements: g = grad*grad_scale; m,v moments; bias-corrected with step t (1-based);
  // param -= lr * (mhat/(sqrt(vhat)+eps) + weight_decay*param).
  virtual void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float grad_scale, int64_t t) = 0;
};

// What the kernels of `device` ("cpu", "cuda") compute in, without building them (for the run
// check before any work): cpu -> F32; cuda -> F32 and BF16. An unknown device supports nothing.
// Kernels::supports() of a built backend gives the same answer.
bool device_supports(const std::string& device, DType t);

// The core type OpenBLAS runs its kernels for (openblas_get_corename: "SkylakeX", "Prescott").
std::string blas_core_name();

// The CPU implementation (OpenBLAS + OpenMP). threads <= 0 means all cores.
std::unique_ptr<Kernels> make_cpu_kernels(int threads = 0);

}  // namespace trident::kernels
