#include "runtime/cuda/cuda_kernels.h"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "runtime/cuda/attention_matmul.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/kernels_engine.h"
#include "runtime/cuda/kernels_llama.h"
#include "runtime/cuda/kernels_moe.h"
#include "runtime/cuda/matmul.h"

namespace trident::cuda {

using kernels::Trans;
namespace ops = engine_ops;

const char* attention_name(Attention a) { return a == Attention::Matmul ? "matmul" : "flash"; }

CudaKernels::CudaKernels(int device, Attention attention) : device_(device), attention_(attention) {
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  mm_ = std::make_unique<Matmul>(stream_);
  cudaCheck(cudaMalloc(&scalar_, sizeof(double)));
}

CudaKernels::~CudaKernels() {
  cudaStreamSynchronize(stream_);
  mm_.reset();
  for (int32_t* p : staged_) cudaFree(p);
  cudaFree(att_ws_);
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

namespace {

// Calls f(T{}) with T = float or bf16 for the tensor's dtype; the other types are refused.
template <typename F>
void dispatch(const kernels::Tensor& t, const char* op, F&& f) {
  if (t.dtype == kernels::DType::F32) return f(float{});
  if (t.dtype == kernels::DType::BF16) return f(bf16{});
  throw CudaError(std::string(op) + ": the CUDA kernels compute in f32 or bf16, not " + comm::dtype_name(t.dtype));
}

// The typed pointer of an operand that must share the op's type (nullptr when empty).
template <typename T>
T* ptr(const kernels::Tensor& t, kernels::DType type, const char* op) {
  if (t.empty()) return nullptr;
  if (t.dtype != type)
    throw CudaError(std::string(op) + ": operands of mixed types (" + comm::dtype_name(t.dtype) + " and " +
                    comm::dtype_name(type) + ")");
  return static_cast<T*>(t.data);
}

template <typename T>
ElemType elem() {
  return std::is_same_v<T, float> ? ElemType::F32 : ElemType::BF16;
}

}  // namespace

void CudaKernels::convert(const Tensor& dst, const Tensor& src) {
  const size_t n = dst.count;
  if (n == 0) return;
  if (src.count < n) throw CudaError("convert: source has " + std::to_string(src.count) + " elements, needs " + std::to_string(n));
  if (dst.dtype == src.dtype) {
    cudaCheck(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDeviceToDevice, stream_));
  } else if (src.dtype == kernels::DType::F32 && dst.dtype == kernels::DType::BF16) {
    cast_from_float<bf16>(static_cast<bf16*>(dst.data), static_cast<const float*>(src.data), n, stream_);
  } else if (src.dtype == kernels::DType::BF16 && dst.dtype == kernels::DType::F32) {
    cast_to_float<bf16>(static_cast<float*>(dst.data), static_cast<const bf16*>(src.data), n, stream_);
  } else {
    throw CudaError(std::string("convert: ") + comm::dtype_name(src.dtype) + " -> " + comm::dtype_name(dst.dtype) +
                    " is not supported");
  }
}

void CudaKernels::linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                 int64_t N, int64_t IC, int64_t OC) {
  const char* op = "linear_forward";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    mm_->linear_forward(out.data, ptr<T>(inp, out.dtype, op), ptr<T>(weight, out.dtype, op),
                        ptr<T>(bias, out.dtype, op), int(N), int(IC), int(OC), elem<T>());
  });
}

void CudaKernels::linear_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout,
                                  const Tensor& inp, const Tensor& weight, int64_t N, int64_t IC, int64_t OC) {
  const char* op = "linear_backward";
  dispatch(dout, op, [&](auto tag) {
    using T = decltype(tag);
    const T* d = ptr<T>(dout, dout.dtype, op);
    if (!dinp.empty())
      mm_->linear_backward_input(ptr<T>(dinp, dout.dtype, op), d, ptr<T>(weight, dout.dtype, op), int(N), int(IC),
                                 int(OC), elem<T>());
    if (dweight)
      mm_->linear_backward_weight(dweight, d, ptr<T>(inp, dout.dtype, op), int(N), int(IC), int(OC), elem<T>());
    if (dbias) bias_backward<T>(dbias, d, int(N), int(OC), stream_);
  });
}

void CudaKernels::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch(out, "add", [&](auto tag) {
    using T = decltype(tag);
    residual_forward<T>(ptr<T>(out, out.dtype, "add"), ptr<T>(a, out.dtype, "add"), ptr<T>(b, out.dtype, "add"),
                        out.count, stream_);
  });
}
void CudaKernels::add_inplace(const Tensor& out, const Tensor& a) {
  dispatch(out, "add_inplace", [&](auto tag) {
    using T = decltype(tag);
    T* o = ptr<T>(out, out.dtype, "add_inplace");
    residual_forward<T>(o, o, ptr<T>(a, out.dtype, "add_inplace"), out.count, stream_);
  });
}
void CudaKernels::scale(float* x, float s, size_t n) { ops::scale(x, s, n, stream_); }
void CudaKernels::gelu_forward(const Tensor& out, const Tensor& inp) {
  dispatch(out, "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    cuda::gelu_forward<T>(ptr<T>(out, out.dtype, "gelu_forward"), ptr<T>(inp, out.dtype, "gelu_forward"), out.count,
                          stream_);
  });
}
void CudaKernels::gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  const char* op = "gelu_backward";
  dispatch(dinp, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::gelu_backward<T>(ptr<T>(dinp, dinp.dtype, op), ptr<T>(inp, dinp.dtype, op), ptr<T>(dout, dinp.dtype, op),
                           dinp.count, stream_);
  });
}

void CudaKernels::layernorm_forward(const Tensor& out, float* mean, float* rstd, const Tensor& inp,
                                    const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, float eps) {
  const char* op = "layernorm_forward";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::layernorm_forward<T>(ptr<T>(out, out.dtype, op), mean, rstd, ptr<T>(inp, out.dtype, op),
                               ptr<T>(weight, out.dtype, op), ptr<T>(bias, out.dtype, op), int(N), int(C), eps, stream_);
  });
}
void CudaKernels::layernorm_backward(const Tensor& dinp, float* dweight, float* dbias, const Tensor& dout,
                                     const Tensor& inp, const Tensor& weight, const float* mean, const float* rstd,
                                     int64_t N, int64_t C) {
  const char* op = "layernorm_backward";
  dispatch(dinp, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::layernorm_backward<T>(ptr<T>(dinp, dinp.dtype, op), dweight, dbias, ptr<T>(dout, dinp.dtype, op),
                                ptr<T>(inp, dinp.dtype, op), ptr<T>(weight, dinp.dtype, op), mean, rstd, int(N),
                                int(C), stream_);
  });
}

void CudaKernels::rmsnorm_forward(const Tensor& out, float* rstd, const Tensor& inp, const Tensor& weight, int64_t N,
                                  int64_t C, float eps) {
  const char* op = "rmsnorm_forward";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::rmsnorm_forward<T>(ptr<T>(out, out.dtype, op), rstd, ptr<T>(inp, out.dtype, op),
                             ptr<T>(weight, out.dtype, op), int(N), int(C), eps, stream_);
  });
}
void CudaKernels::rmsnorm_backward(const Tensor& dinp, float* dweight, const Tensor& dout, const Tensor& inp,
                                   const Tensor& weight, const float* rstd, int64_t N, int64_t C) {
  const char* op = "rmsnorm_backward";
  dispatch(dinp, op, [&](auto tag) {
    using T = decltype(tag);
    const kernels::DType t = dinp.dtype;
    cuda::rmsnorm_backward<T>(ptr<T>(dinp, t, op), dweight, ptr<T>(dout, t, op), ptr<T>(inp, t, op),
                              ptr<T>(weight, t, op), rstd, int(N), int(C), stream_);
  });
}
void CudaKernels::head_rmsnorm_forward(const Tensor& x, const Tensor& saved, float* rstd, const Tensor& weight,
                                       int64_t N, int64_t heads, int64_t hd, int64_t row, float eps) {
  const char* op = "head_rmsnorm_forward";
  dispatch(x, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::head_rmsnorm_forward<T>(ptr<T>(x, x.dtype, op), ptr<T>(saved, x.dtype, op), rstd, ptr<T>(weight, x.dtype, op),
                                  int(N), int(heads), int(hd), size_t(row), eps, stream_);
  });
}
void CudaKernels::head_rmsnorm_backward(const Tensor& dx, float* dweight, const Tensor& saved, const Tensor& weight,
                                        const float* rstd, int64_t N, int64_t heads, int64_t hd, int64_t row) {
  const char* op = "head_rmsnorm_backward";
  dispatch(dx, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::head_rmsnorm_backward<T>(ptr<T>(dx, dx.dtype, op), dweight, ptr<T>(saved, dx.dtype, op),
                                   ptr<T>(weight, dx.dtype, op), rstd, int(N), int(heads), int(hd), size_t(row),
                                   stream_);
  });
}
void CudaKernels::swiglu_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F) {
  dispatch(out, "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    cuda::swiglu_forward<T>(ptr<T>(out, out.dtype, "swiglu_forward"), ptr<T>(gate_up, out.dtype, "swiglu_forward"),
                            size_t(N), int(F), stream_);
  });
}
void CudaKernels::swiglu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                                  int64_t F) {
  const char* op = "swiglu_backward";
  dispatch(dgate_up, op, [&](auto tag) {
    using T = decltype(tag);
    const kernels::DType t = dgate_up.dtype;
    cuda::swiglu_backward<T>(ptr<T>(dgate_up, t, op), ptr<T>(gate_up, t, op), ptr<T>(dout, t, op), size_t(N), int(F),
                             stream_);
  });
}
void CudaKernels::swiglu_oss_forward(const Tensor& out, const Tensor& gate_up, int64_t N, int64_t F, float limit) {
  const char* op = "swiglu_oss_forward";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::swiglu_oss_forward<T>(ptr<T>(out, out.dtype, op), ptr<T>(gate_up, out.dtype, op), size_t(N), int(F), limit,
                                stream_);
  });
}
void CudaKernels::swiglu_oss_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t N,
                                      int64_t F, float limit) {
  const char* op = "swiglu_oss_backward";
  dispatch(dgate_up, op, [&](auto tag) {
    using T = decltype(tag);
    const kernels::DType t = dgate_up.dtype;
    cuda::swiglu_oss_backward<T>(ptr<T>(dgate_up, t, op), ptr<T>(gate_up, t, op), ptr<T>(dout, t, op), size_t(N),
                                 int(F), limit, stream_);
  });
}
void CudaKernels::gather_rows(const Tensor& dst, const Tensor& src, const int32_t* rows, const float* scale, int64_t n,
                              int64_t C) {
  const char* op = "gather_rows";
  dispatch(dst, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::gather_rows<T>(ptr<T>(dst, dst.dtype, op), ptr<T>(src, dst.dtype, op), rows, scale, int(n), int(C), stream_);
  });
}
void CudaKernels::combine_rows(const Tensor& out, const Tensor& src, const int32_t* pos, const float* w, int64_t N,
                               int64_t k, int64_t C) {
  const char* op = "combine_rows";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::combine_rows<T>(ptr<T>(out, out.dtype, op), ptr<T>(src, out.dtype, op), pos, w, int(N), int(k), int(C),
                          stream_);
  });
}
void CudaKernels::gather_row_dots(float* dots, const Tensor& a, const int32_t* rows, const Tensor& b, int64_t n,
                                  int64_t C) {
  const char* op = "gather_row_dots";
  dispatch(a, op, [&](auto tag) {
    using T = decltype(tag);
    cuda::gather_row_dots<T>(dots, ptr<T>(a, a.dtype, op), rows, ptr<T>(b, a.dtype, op), int(n), int(C), stream_);
  });
}
void CudaKernels::rope(const Tensor& x, int64_t B, int64_t T, int64_t heads, int64_t hd, int64_t row,
                       const kernels::RopeFreq& freq, bool inverse) {
  dispatch(x, "rope", [&](auto tag) {
    using U = decltype(tag);
    cuda::rope<U>(ptr<U>(x, x.dtype, "rope"), size_t(B * T), int(T), int(heads), int(hd), size_t(row), freq, inverse,
                  stream_);
  });
}
void CudaKernels::copy_heads(const Tensor& dst, int64_t dst_row, int64_t dst_head, const Tensor& src, int64_t src_row,
                             int64_t src_head, int64_t rows, int64_t heads, int64_t cols, bool accumulate,
                             float scale) {
  const char* op = "copy_heads";
  dispatch(dst, op, [&](auto tag) {
    using U = decltype(tag);
    cuda::copy_heads<U>(ptr<U>(dst, dst.dtype, op), size_t(dst_row), size_t(dst_head), ptr<U>(src, dst.dtype, op),
                        size_t(src_row), size_t(src_head), size_t(rows), int(heads), int(cols), accumulate, scale,
                        stream_);
  });
}
void CudaKernels::gqa_expand(const Tensor& qkv, const Tensor& q, const Tensor& kv, int64_t N, int64_t nh,
                             int64_t nkv, int64_t hd) {
  const char* op = "gqa_expand";
  dispatch(qkv, op, [&](auto tag) {
    using U = decltype(tag);
    const kernels::DType t = qkv.dtype;
    cuda::gqa_expand<U>(ptr<U>(qkv, t, op), ptr<U>(q, t, op), ptr<U>(kv, t, op), size_t(N), int(nh), int(nkv), int(hd),
                        stream_);
  });
}
void CudaKernels::gqa_reduce(const Tensor& dq, const Tensor& dkv, const Tensor& dqkv, int64_t N, int64_t nh,
                             int64_t nkv, int64_t hd) {
  const char* op = "gqa_reduce";
  dispatch(dq, op, [&](auto tag) {
    using U = decltype(tag);
    const kernels::DType t = dq.dtype;
    cuda::gqa_reduce<U>(ptr<U>(dq, t, op), ptr<U>(dkv, t, op), ptr<U>(dqkv, t, op), size_t(N), int(nh), int(nkv),
                        int(hd), stream_);
  });
}

// Flash: probs is each row's log-sum-exp (B*nh*T), scratch the backward's delta (B*nh*T).
// Matmul: probs holds P (B*nh*T*T, in the activation type); its other scratch is internal.
size_t CudaKernels::attention_probs_size(int64_t B, int64_t T, int64_t nh) const {
  return attention_ == Attention::Matmul ? size_t(B * nh * T * T) : size_t(B * T * nh);
}
size_t CudaKernels::attention_scratch_size(int64_t B, int64_t T, int64_t nh) const {
  return attention_ == Attention::Matmul ? 1 : size_t(B * T * nh);
}

void* CudaKernels::attention_workspace(size_t bytes) {
  if (bytes > att_ws_bytes_) {
    cudaCheck(cudaStreamSynchronize(stream_));
    cudaCheck(cudaFree(att_ws_));
    att_ws_ = nullptr;
    cudaCheck(cudaMalloc(&att_ws_, bytes));
    att_ws_bytes_ = bytes;
  }
  return att_ws_;
}

namespace {
template <typename U>
AttentionMatmulScratch<U> matmul_scratch(void* ws, int64_t B, int64_t T, int64_t nh, int64_t hd) {
  U* heads = static_cast<U*>(ws);
  const size_t head_bytes = AttentionMatmulScratch<U>::heads_elems(int(B), int(T), int(nh * hd)) * sizeof(U);
  return {heads, reinterpret_cast<float*>(static_cast<char*>(ws) + (head_bytes + 255) / 256 * 256)};
}
template <typename U>
size_t matmul_scratch_bytes(int64_t B, int64_t T, int64_t nh, int64_t hd) {
  const size_t head_bytes = AttentionMatmulScratch<U>::heads_elems(int(B), int(T), int(nh * hd)) * sizeof(U);
  return (head_bytes + 255) / 256 * 256 + AttentionMatmulScratch<U>::score_elems(int(B), int(T), int(nh)) * sizeof(float);
}
}  // namespace

namespace {
void check_matmul_mask(const kernels::Kernels::AttentionMask& mask, const char* op) {
  if (!mask.plain())
    throw std::invalid_argument(std::string(op) + ": the matmul attention has no sliding window or sinks "
                                "(GPT-OSS); use the flash attention");
}
}  // namespace

void CudaKernels::attention_forward(const Tensor& out, float* probs, const Tensor& qkv, int64_t B, int64_t T,
                                    int64_t nh, int64_t hd, const AttentionMask& mask) {
  const char* op = "attention_forward";
  dispatch(out, op, [&](auto tag) {
    using U = decltype(tag);
    if (attention_ == Attention::Matmul) {
      check_matmul_mask(mask, op);
      void* ws = attention_workspace(matmul_scratch_bytes<U>(B, T, nh, hd));
      attention_matmul_forward<U>(*mm_, ptr<U>(out, out.dtype, op), reinterpret_cast<U*>(probs),
                                  ptr<U>(qkv, out.dtype, op), matmul_scratch<U>(ws, B, T, nh, hd), int(B), int(T),
                                  int(nh), int(hd), stream_);
      return;
    }
    const U* sinks = mask.sinks.empty() ? nullptr : ptr<U>(mask.sinks, out.dtype, op);
    cuda::attention_forward<U>(ptr<U>(out, out.dtype, op), probs, ptr<U>(qkv, out.dtype, op), int(B), int(T), int(nh),
                               int(hd), int(mask.window), sinks, stream_);
  });
}
void CudaKernels::attention_backward(const Tensor& dqkv, float* scratch, const Tensor& dout, const Tensor& qkv,
                                     const float* probs, const Tensor& out, int64_t B, int64_t T, int64_t nh,
                                     int64_t hd, const AttentionMask& mask, float* dsinks) {
  const char* op = "attention_backward";
  dispatch(dqkv, op, [&](auto tag) {
    using U = decltype(tag);
    const kernels::DType t = dqkv.dtype;
    if (attention_ == Attention::Matmul) {
      check_matmul_mask(mask, op);
      // P (in probs) becomes dS in place: one backward per forward, as the stage runs them.
      void* ws = attention_workspace(matmul_scratch_bytes<U>(B, T, nh, hd));
      attention_matmul_backward<U>(*mm_, ptr<U>(dqkv, t, op), reinterpret_cast<U*>(const_cast<float*>(probs)),
                                   ptr<U>(dout, t, op), ptr<U>(qkv, t, op), matmul_scratch<U>(ws, B, T, nh, hd),
                                   int(B), int(T), int(nh), int(hd), stream_);
      return;
    }
    const U* sinks = mask.sinks.empty() ? nullptr : ptr<U>(mask.sinks, t, op);
    cuda::attention_backward<U>(ptr<U>(dqkv, t, op), scratch, ptr<U>(dout, t, op), ptr<U>(qkv, t, op),
                                ptr<U>(out, t, op), probs, int(B), int(T), int(nh), int(hd), int(mask.window), sinks,
                                dsinks, stream_);
  });
}

void CudaKernels::embedding_forward(const Tensor& out, const int32_t* tokens, const Tensor& wte, int64_t N, int64_t C,
                                    int64_t v_offset, int64_t V_local) {
  const char* op = "embedding_forward";
  dispatch(out, op, [&](auto tag) {
    using T = decltype(tag);
    ops::embedding_forward<T>(ptr<T>(out, out.dtype, op), device_ids(tokens, size_t(N), 0), ptr<T>(wte, out.dtype, op),
                              N, C, v_offset, V_local, stream_);
  });
}
void CudaKernels::add_positions(const Tensor& out, const Tensor& wpe, int64_t B, int64_t T, int64_t C) {
  dispatch(out, "add_positions", [&](auto tag) {
    using U = decltype(tag);
    ops::add_positions<U>(ptr<U>(out, out.dtype, "add_positions"), ptr<U>(wpe, out.dtype, "add_positions"), B, T, C,
                          stream_);
  });
}
void CudaKernels::embedding_backward(float* dwte, const Tensor& dout, const int32_t* tokens, int64_t N, int64_t C,
                                     int64_t v_offset, int64_t V_local) {
  dispatch(dout, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    ops::embedding_backward<T>(dwte, ptr<T>(dout, dout.dtype, "embedding_backward"), device_ids(tokens, size_t(N), 0),
                               N, C, v_offset, V_local, stream_);
  });
}
void CudaKernels::positions_backward(float* dwpe, const Tensor& dout, int64_t B, int64_t T, int64_t C) {
  dispatch(dout, "positions_backward", [&](auto tag) {
    using U = decltype(tag);
    ops::positions_backward<U>(dwpe, ptr<U>(dout, dout.dtype, "positions_backward"), B, T, C, stream_);
  });
}

void CudaKernels::xent_row_max(float* row_max, const Tensor& logits, int64_t N, int64_t V_local, int64_t V_valid) {
  dispatch(logits, "xent_row_max", [&](auto tag) {
    using T = decltype(tag);
    ops::xent_row_max<T>(row_max, ptr<T>(logits, logits.dtype, "xent_row_max"), N, V_local, V_valid, stream_);
  });
}
void CudaKernels::xent_sumexp_target(float* sumexp, float* target_logit, const Tensor& logits, const float* row_max,
                                     const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                                     int64_t v_offset) {
  dispatch(logits, "xent_sumexp_target", [&](auto tag) {
    using T = decltype(tag);
    ops::xent_sumexp_target<T>(sumexp, target_logit, ptr<T>(logits, logits.dtype, "xent_sumexp_target"), row_max,
                               device_ids(targets, size_t(N), 1), N, V_local, V_valid, v_offset, stream_);
  });
}
void CudaKernels::xent_losses(float* losses, const float* sumexp, const float* row_max, const float* target_logit,
                              int64_t N) {
  ops::xent_losses(losses, sumexp, row_max, target_logit, N, stream_);
}
void CudaKernels::xent_backward_inplace(const Tensor& logits, const float* row_max, const float* sumexp,
                                        const int32_t* targets, float dloss, int64_t N, int64_t V_local,
                                        int64_t V_valid, int64_t v_offset) {
  dispatch(logits, "xent_backward_inplace", [&](auto tag) {
    using T = decltype(tag);
    ops::xent_backward_inplace<T>(ptr<T>(logits, logits.dtype, "xent_backward_inplace"), row_max, sumexp,
                                  device_ids(targets, size_t(N), 1), dloss, N, V_local, V_valid, v_offset, stream_);
  });
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

std::unique_ptr<kernels::Kernels> make_cuda_kernels(bool share_gpus, Attention attention) {
  DeviceInfo info = select_gpu_for_rank(local_rank_from_env(), local_size_from_env(), share_gpus);
  return std::make_unique<CudaKernels>(info.index, attention);
}

}  // namespace trident::cuda
