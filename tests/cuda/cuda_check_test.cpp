// The error wrappers name the library, the call, the file and line, and the library's cause.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "runtime/cuda/cuda_check.h"

using trident::cuda::CudaError;

namespace {
std::string message_of(void (*fn)()) {
  try {
    fn();
  } catch (const CudaError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CudaCheck, failure_names_call_file_line_and_cause) {
  int line = 0;
  std::string msg;
  try {
    line = __LINE__ + 1;
    cudaCheck(cudaErrorMemoryAllocation);
  } catch (const CudaError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("CUDA error 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaErrorMemoryAllocation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda_check_test.cpp:" + std::to_string(line)), std::string::npos) << msg;
}

TEST(CudaCheck, success_does_not_throw) {
  EXPECT_NO_THROW(cudaCheck(cudaSuccess));
  EXPECT_NO_THROW(cublasCheck(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(ncclCheck(ncclSuccess));
}

TEST(CublasCheck, failure_names_the_status) {
  std::string msg = message_of([] { cublasCheck(CUBLAS_STATUS_NOT_SUPPORTED); });
  EXPECT_NE(msg.find("cuBLAS error"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda_check_test.cpp"), std::string::npos) << msg;
}

TEST(NcclCheck, failure_names_the_nccl_cause) {
  std::string msg = message_of([] { ncclCheck(ncclInvalidArgument); });
  EXPECT_NE(msg.find("NCCL error 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid argument"), std::string::npos) << msg;
}
