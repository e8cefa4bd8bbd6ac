// The dtype check every fp32-only kernel makes once per call, and what each device computes in
// (see ops.h).
#include <stdexcept>
#include <string>

#include "capability/capability.h"
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
  if (t != DType::F32 && t != DType::BF16) return false;  // no backend computes in the others
  return capability::device_computes(device, t == DType::F32 ? Precision::FP32 : Precision::BF16);
}

// The defaults of the grouped-query attention ops: a backend that lacks them refuses by name.
void Kernels::gqa_expand(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  throw std::invalid_argument("gqa_expand: no kernel on " + device_name() + " (Llama models train on the CPU)");
}
void Kernels::gqa_reduce(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  throw std::invalid_argument("gqa_reduce: no kernel on " + device_name() + " (Llama models train on the CPU)");
}


// The ring-attention ops' defaults (context parallel trains on the CPU backend).
namespace {
[[noreturn]] void no_ring(const char* op, const std::string& device) {
  throw std::invalid_argument(std::string(op) + ": no kernel on " + device + " (context parallel trains on the CPU)");
}
}  // namespace
void Kernels::ring_kv_pack(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  no_ring("ring_kv_pack", device_name());
}
void Kernels::ring_kv_unpack(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  no_ring("ring_kv_unpack", device_name());
}
size_t Kernels::ring_attention_scratch_size(int64_t, int64_t) const { return 0; }
void Kernels::attention_block_forward(const Tensor&, float*, const Tensor&, const Tensor&, const AttentionBlock&, bool,
                                      float*) {
  no_ring("attention_block_forward", device_name());
}
void Kernels::attention_block_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, const float*, const AttentionBlock&, float*) {
  no_ring("attention_block_backward", device_name());
}
void Kernels::attention_sink_merge(const Tensor&, float*, const Tensor&, int64_t, int64_t, int64_t, int64_t) {
  no_ring("attention_sink_merge", device_name());
}
void Kernels::attention_sink_backward(float*, const Tensor&, const Tensor&, const float*, const Tensor&, int64_t,
                                      int64_t, int64_t, int64_t) {
  no_ring("attention_sink_backward", device_name());
}
void Kernels::rope_at(const Tensor&, int64_t, int64_t, int64_t, int64_t, const RopeFreq&, bool, int64_t) {
  no_ring("rope_at", device_name());
}

}  // namespace trident::kernels
