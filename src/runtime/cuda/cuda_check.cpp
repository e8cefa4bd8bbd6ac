#include "runtime/cuda/cuda_check.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

namespace trident::cuda {

namespace {
const char* base_name(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}
}  // namespace

std::string describe_failure(const char* library, int code, const char* cause, const char* call,
                             const char* file, int line) {
  return std::string(library) + " error " + std::to_string(code) + " (" + cause + ") in " + call + " at " +
         base_name(file) + ":" + std::to_string(line);
}

void check_cuda(int code, const char* call, const char* file, int line) {
  if (code == cudaSuccess) return;
  auto err = static_cast<cudaError_t>(code);
  std::string cause = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  throw CudaError(describe_failure("CUDA", code, cause.c_str(), call, file, line));
}

void check_cublas(int code, const char* call, const char* file, int line) {
  if (code == CUBLAS_STATUS_SUCCESS) return;
  auto status = static_cast<cublasStatus_t>(code);
  std::string cause = std::string(cublasLtGetStatusName(status)) + ": " + cublasLtGetStatusString(status);
  throw CudaError(describe_failure("cuBLAS", code, cause.c_str(), call, file, line));
}

void check_nccl(int code, const char* call, const char* file, int line) {
  if (code == ncclSuccess) return;
  std::string cause = ncclGetErrorString(static_cast<ncclResult_t>(code));
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) cause += std::string(": ") + last;
  throw CudaError(describe_failure("NCCL", code, cause.c_str(), call, file, line));
}

}  // namespace trident::cuda
