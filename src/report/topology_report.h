// Text and JSON renderings of the strategy <-> topology table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/run_spec.h"
#include "core/topology.h"

namespace trident {

std::string topology_text(const RunSpec& run, const Mesh& mesh, const TopologyTable& table);
// {"world", "layout", "groups": [{"kind","index","ranks","nodes","link","bandwidth_gbps"}]}
// (bandwidth_gbps in GB/s per GPU and direction).
nlohmann::json topology_json(const RunSpec& run, const TopologyTable& table);

// "gpt3-175b: 96 layers, h 12288, 96 heads, ..., 174.60 B parameters"
std::string describe_model(const ModelSpec& model);

}  // namespace trident
