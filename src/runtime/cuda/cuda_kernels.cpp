#include "runtime/cuda/cuda_kernels.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/kernels_engine.h"
#include "runtime/cuda/matmul.h"

namespace trident::cuda {

using kernels::Trans;
namespace ops = engine_ops;

CudaKernels::CudaKernels(int device) : device_(device) {
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  mm_ = std::make_unique<Matmul>(stream_);
  cudaCheck(cudaMalloc(&scalar_, sizeof(double)));
}

CudaKernels::~CudaKernels() {
  cudaStreamSynchronize(stream_);
  mm_.reset();
  for (int32_t* p : staged_) cudaFree(p);
  cudaFree(scalar_);
  cudaStreamDestroy(stream_);
}

std::string CudaKernels::device_name() const {
  cudaDeviceProp prop{};
  cudaCheck(cudaGetDeviceProperties(&prop, device_));
  return "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
}

float* CudaKernels::alloc(size_t count) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, count * sizeof(float));
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw CudaError("out of GPU memory: asked for " + std::to_string(count * sizeof(float)) + " bytes with " +
                    std::to_string(free_bytes) + " of " + std::to_string(total) + " bytes free on " + device_name());
  }
  cudaCheck(err);
  cudaCheck(cudaMemsetAsync(p, 0, count * sizeof(float), stream_));
  return static_cast<float*>(p);
}
void CudaKernels::free(float* p, size_t) {
  cudaCheck(cudaStreamSynchronize(stream_));
  cudaCheck(cudaFree(p));
}
void CudaKernels::zero(float* p, size_t count) { cudaCheck(cudaMemsetAsync(p, 0, count * sizeof(float), stream_)); }
void CudaKernels::copy(float* dst, const float* src, size_t count) {
  cudaCheck(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}
void CudaKernels::to_host(float* host, const float* src, size_t count) {
  cudaCheck(cudaMemcpyAsync(host, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
}
void CudaKernels::from_host(float* dst, const float* host, size_t count) {
  cudaCheck(cudaMemcpyAsync(dst, host, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));  // the host buffer may be reused right after
}
void CudaKernels::synchronize() { cudaCheck(cudaStreamSynchronize(stream_)); }

const int32_t* CudaKernels::device_ids(const int32_t* ids, size_t n, int slot) {
  cudaPointerAttributes attr{};
  cudaCheck(cudaPointerGetAttributes(&attr, ids));
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) return ids;
  if (staged_count_[slot] < n) {
    cudaCheck(cudaStreamSynchronize(stream_));
    cudaCheck(cudaFree(staged_[slot]));
    cudaCheck(cudaMalloc(&staged_[slot], n * sizeof(int32_t)));
    staged_count_[slot] = n;
  }
  cudaCheck(cudaMemcpyAsync(staged_[slot], ids, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
  return staged_[slot];
}

void CudaKernels::gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  mm_->gemm(tb == Trans::T, ta == Trans::T, int(N), int(M), int(K), B, int(ldb), A, int(lda), C, int(ldc), alpha, beta,
            ElemType::F32, ElemType::F32);
}

void CudaKernels::linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                                 int64_t IC, int64_t OC) {
  mm_->linear_forward(out, inp, weight, bias, int(N), int(IC), int(OC), ElemType::F32);
}

void CudaKernels::linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, int64_t N, int64_t IC, int64_t OC) {
  if (dinp) mm_->linear_backward_input(dinp, dout, weight, int(N), int(IC), int(OC), ElemType::F32);
  mm_->linear_backward_weight(dweight, dout, inp, int(N), int(IC), int(OC), ElemType::F32);
  if (dbias) bias_backward<float>(dbias, dout, int(N), int(OC), stream_);
}

void CudaKernels::add(float* out, const float* a, const float* b, size_t n) { ops::add(out, a, b, n, stream_); }
void CudaKernels::add_inplace(float* out, const float* a, size_t n) { ops::add_inplace(out, a, n, stream_); }
void CudaKernels::scale(float* x, float s, size_t n) { ops::scale(x, s, n, stream_); }
void CudaKernels::gelu_forward(float* out, const float* inp, size_t n) {
  cuda::gelu_forward<float>(out, inp, n, stream_);
}
void CudaKernels::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  cuda::gelu_backward<float>(dinp, inp, dout, n, stream_);
}

void CudaKernels::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                    const float* bias, int64_t N, int64_t C) {
  cuda::layernorm_forward<float>(out, mean, rstd, inp, weight, bias, int(N), int(C), stream_);
}
void CudaKernels::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                     const float* weight, const float* mean, const float* rstd, int64_t N,
                                     int64_t C) {
  cuda::layernorm_backward<float>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, int(N), int(C), stream_);
}

size_t CudaKernels::attention_probs_size(int64_t B, int64_t T, int64_t nh) const { return size_t(B * T * nh); }
size_t CudaKernels::attention_scratch_size(int64_t B, int64_t T, int64_t nh) const { return size_t(B * T * nh); }
void CudaKernels::attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t nh,
                                    int64_t hd) {
  cuda::attention_forward<float>(out, probs, qkv, int(B), int(T), int(nh), int(hd), stream_);
}
void CudaKernels::attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                     const float* probs, const float* out, int64_t B, int64_t T, int64_t nh,
                                     int64_t hd) {
  cuda::attention_backward<float>(dqkv, scratch, dout, qkv, out, probs, int(B), int(T), int(nh), int(hd), stream_);
}

void CudaKernels::embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C,
                                    int64_t v_offset, int64_t V_local) {
  ops::embedding_forward(out, device_ids(tokens, size_t(N), 0), wte, N, C, v_offset, V_local, stream_);
}
void CudaKernels::add_positions(float* out, const float* wpe, int64_t B, int64_t T, int64_t C) {
  ops::add_positions(out, wpe, B, T, C, stream_);
}
void CudaKernels::embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                                     int64_t v_offset, int64_t V_local) {
  ops::embedding_backward(dwte, dout, device_ids(tokens, size_t(N), 0), N, C, v_offset, V_local, stream_);
}
void CudaKernels::positions_backward(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C) {
  ops::positions_backward(dwpe, dout, B, T, C, stream_);
}

void CudaKernels::xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local) {
  ops::xent_row_max(row_max, logits, N, V_local, stream_);
}
void CudaKernels::xent_sumexp_target(float* sumexp, float* target_logit, const float* logits, const float* row_max,
                                     const int32_t* targets, int64_t N, int64_t V_local, int64_t v_offset) {
  ops::xent_sumexp_target(sumexp, target_logit, logits, row_max, device_ids(targets, size_t(N), 1), N, V_local,
                          v_offset, stream_);
}
void CudaKernels::xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                              int64_t N) {
  ops::xent_losses(losses, sumexp, row_max, target_logit, N, stream_);
}
void CudaKernels::xent_backward_inplace(float* logits, const float* row_max, const float* sumexp,
                                        const int32_t* targets, float dloss, int64_t N, int64_t V_local,
                                        int64_t v_offset) {
  ops::xent_backward_inplace(logits, row_max, sumexp, device_ids(targets, size_t(N), 1), dloss, N, V_local, v_offset,
                             stream_);
}

double CudaKernels::sum_squares(const float* x, size_t n) {
  ops::sum_squares(scalar_, x, n, stream_);
  double result = 0.0;
  cudaCheck(cudaMemcpyAsync(&result, scalar_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
  return result;
}

void CudaKernels::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
                        float beta2, float eps, float weight_decay, float grad_scale, int64_t t) {
  ops::adamw(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t, stream_);
}

std::unique_ptr<kernels::Kernels> make_cuda_kernels() {
  DeviceInfo info = select_gpu(local_rank_from_env());
  return std::make_unique<CudaKernels>(info.index);
}

}  // namespace trident::cuda
