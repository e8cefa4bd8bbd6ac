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

// The defaults of the grouped-query attention ops: a backend that lacks them refuses by name.
void Kernels::gqa_expand(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  throw std::invalid_argument("gqa_expand: no kernel on " + device_name() + " (Llama models train on the CPU)");
}
void Kernels::gqa_reduce(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  throw std::invalid_argument("gqa_reduce: no kernel on " + device_name() + " (Llama models train on the CPU)");
}

}  // namespace trident::kernels
