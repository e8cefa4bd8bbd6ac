// Error checks for every CUDA, cuBLAS(Lt) and NCCL call: a failure throws CudaError naming
// the library, the call, the file and line, and the library's own description of the cause.
// Use the macros (cudaCheck, cublasCheck, ncclCheck) so file and line are the caller's.
#pragma once

#include <stdexcept>
#include <string>

namespace trident::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "CUDA error 2 (out of memory) in cudaMalloc(&p, n) at cuda_kernels.cpp:42".
std::string describe_failure(const char* library, int code, const char* cause, const char* call,
                             const char* file, int line);

// Each throws CudaError when code is not the library's success value.
void check_cuda(int code, const char* call, const char* file, int line);
void check_cublas(int code, const char* call, const char* file, int line);
void check_nccl(int code, const char* call, const char* file, int line);

}  // namespace trident::cuda

#define cudaCheck(call) ::trident::cuda::check_cuda(static_cast<int>(call), #call, __FILE__, __LINE__)
#define cublasCheck(call) ::trident::cuda::check_cublas(static_cast<int>(call), #call, __FILE__, __LINE__)
#define ncclCheck(call) ::trident::cuda::check_nccl(static_cast<int>(call), #call, __FILE__, __LINE__)
// After a kernel launch: catches bad launch configurations at the launch site.
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())
