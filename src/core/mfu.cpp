#include "core/mfu.h"

#include <cmath>

#include <fmt/format.h>

namespace trident {

namespace {
constexpr const char* kConvention =
    "full attention: causal attention's score and value products counted in full (4 s^2 h per layer forward), as "
    "Korthikanti et al. 2022, PaLM and the Llama 3 paper count them";
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

}  // namespace trident
