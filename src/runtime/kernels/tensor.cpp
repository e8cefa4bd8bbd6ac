// The dtype check every fp32-only kernel makes once per call, and what each device computes in
// (see ops.h).
#include <stdexcept>
#include <string>

#include "runtime/kernels/ops.h"

namespace trident::kernels {

float* f32_data(const Tensor& t, const char* op, size_t need) {
  if (t.empty()) return nullptr;
  if (t.dtype != DType::F32)
    throw std::invalid_argument(std::string(op) + ": this backend computes in f32 only, got a " +
                                comm::dtype_name(t.dtype) + " tensor");
  if (t.count < need)
    throw std::invalid_argument(std::string(op) + ": tensor of " + std::to_string(t.count) + " elements, needs " +
                                std::to_string(need));
  return static_cast<float*>(t.data);
}

bool device_supports(const std::string& device, DType t) {
  if (device == "cpu") return t == DType::F32;
  if (device == "cuda") return t == DType::F32 || t == DType::BF16;
  return false;
}

}  // namespace trident::kernels
