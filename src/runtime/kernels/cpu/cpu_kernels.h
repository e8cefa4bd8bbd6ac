// CpuKernels: the Kernels interface on the host. Matrix products go to OpenBLAS sgemm, called
// single-threaded from each OpenMP thread on its slice of the output, so OpenBLAS's threads and
// OpenMP's never oversubscribe the cores; everything else is OpenMP loops the compiler
// vectorises (-march=native).
#pragma once

#include "runtime/kernels/ops.h"

namespace trident::kernels {

// Not final: tests derive from it to watch which memory the trainer hands a communicator.
class CpuKernels : public Kernels {
 public:
  explicit CpuKernels(int threads);
  std::string device_name() const override;
  int threads() const { return threads_; }
  bool supports(DType t) const override { return device_supports("cpu", t); }

  float* alloc(size_t count) override;
  void free(float* p, size_t count) override;
  void zero(float* p, size_t count) override;
  void copy(float* dst, const float* src, size_t count) override;
  void to_host(float* host, const float* src, size_t count) override;
  void from_host(float* dst, const float* host, size_t count) override;
  void synchronize() override {}
  void convert(const Tensor& dst, const Tensor& src) override;

  void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
            const float* B, int64_t ldb, float beta, float* C, int64_t ldc) override;
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
  void swiglu_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F) override;
  void swiglu_oss_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F, float limit) override;
  void swiglu_oss_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N, int64_t F,
                           float limit) override;
  void swiglu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                       int64_t F) override;
  void rope(const Tensor& x, int64_t B, int64_t T, int64_t heads, int64_t hd, int64_t row, const RopeFreq& freq,
            bool inverse) override;

  void gather_rows(const Tensor& dst, const Tensor& src, const int32_t* rows, const float* scale, int64_t n,
                   int64_t C) override;
  void combine_rows(const Tensor& out, const Tensor& src, const int32_t* pos, const float* w, int64_t N, int64_t k,
                    int64_t C) override;
  void gather_row_dots(float* dots, const Tensor& a, const int32_t* rows, const Tensor& b, int64_t n,
                       int64_t C) override;

  void copy_heads(const Tensor& dst, int64_t dst_row, int64_t dst_head, const Tensor& src, int64_t src_row,
                  int64_t src_head, int64_t rows, int64_t heads, int64_t cols, bool accumulate,
                  float scale) override;
  bool supports_gqa() const override { return true; }
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

  bool supports_ring_attention() const override { return true; }
  void ring_kv_pack(const Tensor& kv, const Tensor& qkv, int64_t N, int64_t nh, int64_t nkv, int64_t hd) override;
  void ring_kv_unpack(const Tensor& dqkv, const Tensor& dkv, int64_t N, int64_t nh, int64_t nkv, int64_t hd) override;
  size_t ring_attention_scratch_size(int64_t T, int64_t hd) const override;
  void attention_block_forward(const Tensor& out, float* lse, const Tensor& qkv, const Tensor& kv,
                               const AttentionBlock& blk, bool first, float* scratch) override;
  void attention_block_backward(const Tensor& dqkv, const Tensor& dkv, const Tensor& dout, const Tensor& qkv,
                                const Tensor& kv, const Tensor& out, const float* lse, const AttentionBlock& blk,
                                float* scratch) override;
  void attention_sink_merge(const Tensor& out, float* lse, const Tensor& sinks, int64_t B, int64_t T, int64_t nh,
                            int64_t hd) override;
  void attention_sink_backward(float* dsinks, const Tensor& dout, const Tensor& out, const float* lse,
                               const Tensor& sinks, int64_t B, int64_t T, int64_t nh, int64_t hd) override;
  void rope_at(const Tensor& x, int64_t T, int64_t heads, int64_t hd, int64_t row, const RopeFreq& freq, bool inverse,
               int64_t first_position) override;

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
  // Single-threaded sgemm on the calling thread.
  void gemm_serial(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
  int threads_;
};

// Host memory for the engine: 2 MiB aligned, advised for transparent huge pages, pre-faulted
// (touched once here, so training steps take no page faults).
void* host_alloc(size_t bytes);
void host_free(void* p, size_t bytes);

}  // namespace trident::kernels
