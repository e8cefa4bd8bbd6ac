// MFU of a planned or measured step: the model FLOPs of the planner's cost model (model_flops_per_step)
// against a peak. The figure and its text (Mfu, mfu_text, mfu_json) are core's (core/mfu.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "core/execution_spec.h"
#include "core/mfu.h"
#include "core/model_spec.h"

namespace trident::plan {

using trident::Mfu;
using trident::mfu_json;
using trident::mfu_text;

// The GPU's dense peak for the precision the matrix products run in.
double peak_flops(const GpuSpec& gpu, Precision precision);

// Model FLOPs of a step of `global_batch` sequences against `peak_flops` (all GPUs together).
Mfu mfu_of(const ModelSpec& model, int64_t global_batch, double step_s, double peak_flops);

}  // namespace trident::plan
