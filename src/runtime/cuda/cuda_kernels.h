// CudaKernels: the engine's device-agnostic kernel interface (runtime/kernels/ops.h) on one GPU,
// so the engine's GPT layers -- and with them every TP/PP/DP layout -- run on GPU ranks
// unchanged, in fp32 or in bf16 mixed precision: each op picks the float or bf16 instance of
// its kernel from the Tensors' dtype (once per call). Matrix products are cuBLASLt: plain fp32
// (no TF32, so fp32 results match the CPU path to rounding) or bf16 inputs with fp32
// accumulation; weight gradients are always accumulated in fp32.
//
// Pointers are GPU memory from alloc(). Token ids may be GPU memory or host memory: host ids
// are copied to a GPU staging buffer first (found with cudaPointerGetAttributes), because the
// interface has no int upload. attention "probs" holds the flash kernel's log-sum-exp per row
// (B*nh*T floats), or the matmul attention's probabilities (B*nh*T*T, activation type).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "runtime/kernels/ops.h"

namespace trident::cuda {

class Matmul;

// Attention implementation: Flash keeps O(T) statistics and runs on CUDA cores (kernels.h);
// Matmul runs QK^T and PV on tensor cores and keeps each layer's T x T probabilities
// (attention_matmul.h): faster, O(T^2) memory.
enum class Attention { Flash, Matmul };
const char* attention_name(Attention a);

class CudaKernels final : public kernels::Kernels {
 public:
  using Tensor = kernels::Tensor;
  // device: a GPU already checked by select_gpu().
  explicit CudaKernels(int device, Attention attention = Attention::Flash);
  Attention attention() const { return attention_; }
  ~CudaKernels() override;
  cudaStream_t stream() const { return stream_; }

  std::string device_name() const override;
  bool supports(kernels::DType t) const override { return kernels::device_supports("cuda", t); }
  float* alloc(size_t count) override;
  void free(float* p, size_t count) override;
  void zero(float* p, size_t count) override;
  void copy(float* dst, const float* src, size_t count) override;
  void to_host(float* host, const float* src, size_t count) override;
  void from_host(float* dst, const float* host, size_t count) override;
  void synchronize() override;
  void convert(const kernels::Tensor& dst, const kernels::Tensor& src) override;

  void gemm(kernels::Trans ta, kernels::Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
            int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) override;
  void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int64_t N,
                      int64_t IC, int64_t OC) override;
  void linear_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout, const Tensor& inp,
                       const Tensor& weight, int64_t N, int64_t IC, int64_t OC) override;

  void add(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void add_inplace(const Tensor& out, const Tensor& a) override;
  void scale(float* x, float s, size_t n) override;
  void gelu_forward(const Tensor& out, const Tensor& inp) override;
  void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout) override;

  void layernorm_forward(const Tensor& out, float* mean, float* rstd, const Tensor& inp, const Tensor& weight,
                         const Tensor& bias, int64_t N, int64_t C, float eps) override;
  void layernorm_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout, const Tensor& inp,
                          const Tensor& weight, const float* mean, const float* rstd, int64_t N, int64_t C) override;

  void rmsnorm_forward(const Tensor& out, float* rstd, const Tensor& inp, const Tensor& weight, int64_t N,
                       int64_t C, float eps) override;
  void rmsnorm_backward(const Tensor& dinp, float* dweight, const Tensor& dout, const Tensor& inp,
                        const Tensor& weight, const float* rstd, int64_t N, int64_t C) override;
  void head_rmsnorm_forward(const Tensor& x, const Tensor& saved, float* rstd, const Tensor& weight, int64_t N,
                            int64_t heads, int64_t hd, int64_t row, float eps) override;
  void head_rmsnorm_backward(const Tensor& dx, float* dweight, const Tensor& saved, const Tensor& weight,
                             const float* rstd, int64_t N, int64_t heads, int64_t hd, int64_t row) override;
  void gather_rows(const Tensor& dst, const Tensor& src, const int32_t* rows, const float* scale, int64_t n,
                   int64_t C) override;
  void combine_rows(const Tensor& out, const Tensor& src, const int32_t* pos, const float* w, int64_t N, int64_t k,
                    int64_t C) override;
  void gather_row_dots(float* dots, const Tensor& a, const int32_t* rows, const Tensor& b, int64_t n,
                       int64_t C) override;
  void swiglu_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F) override;
  void swiglu_oss_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F, float limit) override;
  void swiglu_oss_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N, int64_t F,
                           float limit) override;
  void swiglu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                       int64_t F) override;
  void rope(const Tensor& x, int64_t B, int64_t T, int64_t heads, int64_t hd, int64_t row, const kernels::RopeFreq& freq,
            bool inverse) override;
  bool supports_gqa() const override { return true; }
  void copy_heads(const Tensor& dst, int64_t dst_row, int64_t dst_head, const Tensor& src, int64_t src_row,
                  int64_t src_head, int64_t rows, int64_t heads, int64_t cols, bool accumulate,
                  float scale) override;
  void gqa_expand(const Tensor& qkv, const Tensor& q, const Tensor& kv, int64_t N, int64_t nh, int64_t nkv,
                  int64_t hd) override;
  void gqa_reduce(const Tensor& dq, const Tensor& dkv, const Tensor& dqkv, int64_t N, int64_t nh, int64_t nkv,
                  int64_t hd) override;

  size_t attention_probs_size(int64_t B, int64_t T, int64_t nh) const override;
  void attention_forward(const Tensor& out, float* probs, const Tensor& qkv, int64_t B, int64_t T, int64_t nh,
                         int64_t hd, const AttentionMask& mask = {}) override;
  size_t attention_scratch_size(int64_t B, int64_t T, int64_t nh) const override;
  void attention_backward(const Tensor& dqkv, float* scratch, const Tensor& dout, const Tensor& qkv,
                          const float* probs, const Tensor& out, int64_t B, int64_t T, int64_t nh,
                          int64_t hd, const AttentionMask& mask = {}, float* dsinks = nullptr) override;

  void embedding_forward(const Tensor& out, const int32_t* tokens, const Tensor& wte, int64_t N, int64_t C,
                         int64_t v_offset, int64_t V_local) override;
  void add_positions(const Tensor& out, const Tensor& wpe, int64_t B, int64_t T, int64_t C) override;
  void embedding_backward(float* dwte, const Tensor& dout, const int32_t* tokens, int64_t N, int64_t C,
                          int64_t v_offset, int64_t V_local) override;
  void positions_backward(float* dwpe, const Tensor& dout, int64_t B, int64_t T, int64_t C) override;

  void xent_row_max(float* row_max, const Tensor& logits, int64_t N, int64_t V_local, int64_t V_valid) override;
  void xent_sumexp_target(float* sumexp, float* target_logit, const Tensor& logits, const float* row_max,
                          const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid, int64_t v_offset) override;
  void xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                   int64_t N) override;
  void xent_backward_inplace(const Tensor& logits, const float* row_max, const float* sumexp, const int32_t* targets,
                             float dloss, int64_t N, int64_t V_local, int64_t V_valid, int64_t v_offset) override;

  double sum_squares(const float* x, size_t n) override;
  void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1, float beta2,
             float eps, float weight_decay, float grad_scale, int64_t t) override;

 private:
  const int32_t* device_ids(const int32_t* ids, size_t n, int slot);  // stages host ids to the GPU

  // Grow-only scratch of the matmul attention: head-major q/k/v/o and their gradients, fp32 scores.
  void* attention_workspace(size_t bytes);

  int device_;
  Attention attention_;
  void* att_ws_ = nullptr;
  size_t att_ws_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Matmul> mm_;
  int32_t* staged_[2] = {nullptr, nullptr};  // slot 0: tokens, slot 1: targets
  size_t staged_count_[2] = {0, 0};
  double* scalar_ = nullptr;
};

// The engine's entry point for --device cuda: selects the GPU of this rank (node-local rank),
// with a clear error when there is none or (share_gpus = false) when the node runs more ranks
// than it has GPUs, and returns its kernels. share_gpus: several ranks per GPU (host-staged MPI).
std::unique_ptr<kernels::Kernels> make_cuda_kernels(bool share_gpus = false, Attention attention = Attention::Flash);

}  // namespace trident::cuda
