// What `trident models` and `trident clusters` print: the built-in model presets with their
// shapes and parameter counts, and the cluster and GPU presets with the figures the planner uses.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trident {

// One row per model preset: family, layers, hidden, heads / kv heads, head dim, MLP width,
// experts, vocabulary, sequence, total and active parameters (count_parameters, term by term in
// `plan`'s start-up table).
std::string models_text();
nlohmann::json models_json();

// The cluster presets (GPU, GPUs per host, NVLink domain, link kinds, bandwidths, latencies) and
// the GPU presets (memory, dense 16-bit / fp8 / fp32 peaks, HBM bandwidth).
std::string clusters_text();
nlohmann::json clusters_json();

}  // namespace trident
