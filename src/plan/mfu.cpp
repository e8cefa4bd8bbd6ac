#include "plan/mfu.h"

#include <cmath>

#include <fmt/format.h>

#include "plan/cost_model.h"

namespace trident::plan {

namespace {
constexpr const char* kConvention =
    "full attention: causal attention's score and value products counted in full (4 s^2 h per layer forward), as "
    "Korthikanti et al. 2022, PaLM and the Llama 3 paper count them";
}

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

std::string mfu_text(const Mfu& m) {
  return fmt::format("MFU {:.1f}% (attention counted in full; {:.1f}% with causal attention halved, as current "
                     "Megatron-LM counts it)",
                     100 * m.full(), 100 * m.causal());
}

nlohmann::json mfu_json(const Mfu& m) {
  auto r6 = [](double x) { return std::round(x * 1e6) / 1e6; };
  return {{"mfu", r6(m.full())},
          {"mfu_causal_halved", r6(m.causal())},
          {"mfu_convention", kConvention},
          {"model_flops", m.model_flops},
          {"model_flops_causal_halved", m.model_flops_causal}};
}

}  // namespace trident::plan
