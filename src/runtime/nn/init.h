// GPT-2 initialisation of a flat parameter buffer (GPT and Llama alike), independent of how the
// model is sharded.
//
// Each element of a logical tensor (r, c) draws from a counter-based generator keyed by
// (seed, tensor name, r, c), so a TP slice or a pipeline stage holds exactly the values the
// whole model would: a 1-rank and an N-rank run start from the same weights.
//   matrices, wte, wpe, Llama's head_w: N(0, 0.02); attn_proj_w, fc_proj_w: N(0, 0.02/sqrt(2L));
//   biases 0; norm weights 1, LayerNorm biases 0.
#pragma once

#include <cstdint>

#include "runtime/nn/param_layout.h"

namespace trident::nn {

void init_gpt2(const ParamLayout& layout, uint64_t seed, float* host_params);

// Standard normal from a 64-bit counter (splitmix64 + Box-Muller).
float counter_normal(uint64_t key, uint64_t counter);
uint64_t mix64(uint64_t x);

}  // namespace trident::nn
