#include "plan/mfu.h"

#include <cmath>

#include <fmt/format.h>

#include "plan/cost_model.h"

namespace trident::plan {

double peak_flops(const GpuSpec& gpu, Precision precision) {
  switch (precision) {
    case Precision::FP32: return gpu.fp32_flops;
    case Precision::FP8:
    case Precision::MXFP8: return gpu.fp8_flops;  // MX scaling runs at the FP8 rate (Blackwell)
    case Precision::NVFP4: return gpu.fp4_flops;
    default: return gpu.bf16_flops;
  }
}

Mfu mfu_of(const ModelSpec& model, int64_t global_batch, double step_s, double peak) {
  Mfu m;
  m.model_flops = model_flops_per_step(model, global_batch, model.vocab);
  m.model_flops_causal = model_flops_per_step(model, global_batch, model.vocab, true);
  m.peak_flops = peak;
  m.step_s = step_s;
  return m;
}

}  // namespace trident::plan
