// How often a GPU job fails: the one option and default that plan's time to train with failures
// (plan/goodput.h) and train's --checkpoint-every auto share.
#pragma once

#include <fmt/format.h>

#include "core/options.h"

namespace trident {

// Llama 3 (Dubey et al. 2024, section 3.3.4): 419 unexpected interruptions in 54 days on 16,384 H100s.
inline constexpr double kLlama3Failures = 419, kLlama3Days = 54, kLlama3Gpus = 16384;
inline constexpr double kLlama3FailuresPer1000GpuDays = kLlama3Failures / (kLlama3Days * kLlama3Gpus) * 1000;

inline OptionDef failure_rate_option() {
  return {"failures-per-1000-gpu-days", "cluster",
          "unexpected job interruptions per 1,000 GPU-days (time to train with failures, the checkpoint interval)",
          false, "NUM", fmt::format("{:.4f}: Llama 3's 419 in 54 days on 16,384 H100s", kLlama3FailuresPer1000GpuDays)};
}

}  // namespace trident
