// ClusterSpec: the GPUs and the links between them.
//
// A node is one host (gpus_per_node GPUs). An NVLink domain is hosts_per_nvlink_domain hosts
// whose GPUs share one NVLink/NVSwitch fabric: 1 for a DGX (the domain is the host), 18 for a
// GB200 NVL72 rack (18 hosts of 4 GPUs). Bandwidths are per direction in bytes per second.
// Inside a domain each GPU has its own link (NVLink/NVSwitch or PCIe) at intra.bandwidth_Bps.
// Between domains the host's NICs are shared by its GPUs: inter.bandwidth_Bps is the host's
// total, and in a 3D layout every GPU talks at once, so a GPU's share is that total over
// gpus_per_node (inter_bandwidth_per_gpu_Bps).
#pragma once

#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

enum class LinkKind { NVLink, PCIe, InfiniBand, Ethernet };

std::string to_string(LinkKind kind);

struct GpuSpec {
  std::string name;
  double memory_bytes = 0;
  double bf16_flops = 0;  // dense 16-bit tensor-core peak, FLOP/s
  double fp32_flops = 0;  // plain fp32 peak, FLOP/s
  double hbm_Bps = 0;     // memory bandwidth
  double fp8_flops = 0;   // dense FP8 tensor-core peak, FLOP/s; 0 when the GPU has none
  // Dense FP4 (NVFP4) tensor-core peak, FLOP/s; 0 when the GPU has none. The block-scaled formats
  // (MXFP8, NVFP4) come with it: tensor cores that apply per-block scales (Blackwell); a GPU
  // without FP4 (Hopper, Ampere) has neither.
  double fp4_flops = 0;
  bool block_scaling() const { return fp4_flops > 0; }
};

struct LinkSpec {
  LinkKind kind = LinkKind::NVLink;
  double bandwidth_Bps = 0;  // intra: per GPU; inter: per node (all NICs together)
  double latency_s = 0;      // alpha of the alpha-beta model
};

struct ClusterSpec {
  std::string name = "custom";
  GpuSpec gpu;
  int64_t gpus_per_node = 8;            // GPUs per host
  int64_t nodes = 1;                    // hosts
  int64_t hosts_per_nvlink_domain = 1;  // hosts sharing one NVLink fabric
  LinkSpec intra;  // between GPUs of one NVLink domain
  LinkSpec inter;  // between domains (the hosts' NICs)

  int64_t world_size() const { return gpus_per_node * nodes; }
  int64_t gpus_per_nvlink_domain() const { return gpus_per_node * hosts_per_nvlink_domain; }
  double inter_bandwidth_per_gpu_Bps() const { return inter.bandwidth_Bps / double(gpus_per_node); }
  std::string describe() const;  // one line: "512 x dgx-a100-80g = 4096 A100-80GB, NVLink 300 GB/s ..."
};

// Presets by name ("dgx-a100-80g", ...) with one node; set nodes afterwards.
ClusterSpec cluster_preset(const std::string& name);
std::vector<std::string> cluster_preset_names();
bool is_cluster_preset(const std::string& name);

// GPU catalog by name ("a100-80g", "a100-40g", "h100-80g", "h200-141g", "b200-180g", "gb200-186g").
GpuSpec gpu_preset(const std::string& name);
std::vector<std::string> gpu_preset_names();
bool is_gpu_preset(const std::string& name);

void validate_cluster(const ClusterSpec& cluster, Problems& problems);

}  // namespace trident
