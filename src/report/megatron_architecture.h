// The model's architecture as Megatron-LM arguments (`plan --emit megatron`): head width,
// QK-norm, rotary base and scaling, biases, multi-head latent attention, sliding windows and
// sinks, MTP layers and the router, so the launch trains the model that was planned. What
// Megatron cannot express is refused by name.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/problems.h"

namespace trident {

void megatron_architecture_args(const ModelSpec& m, std::vector<std::string>& args, std::vector<std::string>& comments,
                                Problems& refuse);

}  // namespace trident
