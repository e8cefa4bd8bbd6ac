// The model's rotary frequencies for a rotary part of hd features (a head, or MLA's rope part):
// its theta, and Llama 3.1's or YaRN's scaling where it has one (ModelSpec's rope_scaling, YaRN's
// ramp and attention factor from core/rope_scaling.h; capability::beyond_runtime refuses the
// other types before a stage exists). llama_layer.cpp; the references' dump reads it too.
#pragma once

#include <cstdint>

#include "core/model_spec.h"
#include "runtime/kernels/rope_freq.h"

namespace trident::nn {

kernels::RopeFreq rope_freq(const ModelSpec& m, int64_t hd);

}  // namespace trident::nn
