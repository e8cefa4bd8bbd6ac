#include "core/cluster_spec.h"

#include <fmt/format.h>

#include <map>

#include "core/units.h"

namespace trident {

std::string to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::NVLink: return "NVLink";
    case LinkKind::PCIe: return "PCIe";
    case LinkKind::InfiniBand: return "InfiniBand";
    case LinkKind::Ethernet: return "Ethernet";
  }
  return "?";
}

namespace {

// Vendor datasheets (see docs/formulas.md). Memory as nvidia-smi reports it.
const std::map<std::string, GpuSpec>& gpus() {
  static const std::map<std::string, GpuSpec> table = {
      {"a100-80g", {"A100-SXM-80GB", 80 * kGiB, 312 * kTera, 19.5 * kTera, 2039 * kGB}},
      {"a100-40g", {"A100-SXM-40GB", 40 * kGiB, 312 * kTera, 19.5 * kTera, 1555 * kGB}},
      {"a100-pcie-40g", {"A100-PCIe-40GB", 40 * kGiB, 312 * kTera, 19.5 * kTera, 1555 * kGB}},
      {"h100-80g", {"H100-SXM-80GB", 80 * kGiB, 989 * kTera, 67 * kTera, 3350 * kGB, 1979 * kTera}},
      {"h200-141g", {"H200-SXM-141GB", 143771 * kMiB, 989 * kTera, 67 * kTera, 4800 * kGB, 1979 * kTera}},
      // DGX B200 datasheet: 1,440 GB HBM3e and 64 TB/s for 8 GPUs; HGX B200 per GPU 2.25 PFLOP/s
      // dense FP16/BF16, 75 TFLOP/s FP32, 4.5 PFLOP/s dense FP8; FP4 144 PFLOP/s sparse for 8 GPUs
      // -> 9 PFLOP/s dense per GPU (from memory, unverified: no datasheet copy in this repository).
      {"b200-180g", {"B200-SXM-180GB", 180 * kGB, 2250 * kTera, 75 * kTera, 8000 * kGB, 4500 * kTera, 9000 * kTera}},
      // GB200 NVL72 datasheet per rack / 72 GPUs: 180 PFLOP/s dense FP16/BF16 -> 2.5 PFLOP/s,
      // 5,760 TFLOP/s FP32 -> 80, 13.4 TB HBM3e -> 186 GB, 576 TB/s -> 8 TB/s, 360 PFLOP/s FP8 -> 5;
      // FP4 1,440 PFLOP/s sparse -> 10 PFLOP/s dense (from memory, unverified).
      {"gb200-186g", {"B200-GB200-186GB", 186 * kGB, 2500 * kTera, 80 * kTera, 8000 * kGB, 5000 * kTera, 10000 * kTera}},
      // Blackwell Ultra, from NVIDIA's HGX B300 and GB300 NVL72 datasheets (as quoted; not re-read
      // in this copy, made without network access). Dense 16-bit and FP8 peaks as Blackwell's (the
      // gain is in FP4 and the attention's exponentials); 288 GB HBM3e at 8 TB/s per GPU.
      // HGX B300 per 8 GPUs: 36 / 72 PFLOP/s sparse FP16 / FP8 -> 2.25 / 4.5 dense, 600 TFLOP/s FP32,
      // 2.3 TB HBM3e. GB300 NVL72 per rack / 72: 360 / 720 PFLOP/s sparse FP16 / FP8 -> 2.5 / 5 dense,
      // 6 PFLOP/s FP32 -> 83, 21 TB HBM3e (288 GB per GPU), 576 TB/s -> 8 TB/s.
      // Dense FP4 (from memory, unverified): HGX B300 108 PFLOP/s per 8 GPUs -> 13.5; GB300 NVL72
      // 1,080 PFLOP/s per 72 -> 15.
      {"b300-288g", {"B300-SXM-288GB", 288 * kGB, 2250 * kTera, 75 * kTera, 8000 * kGB, 4500 * kTera, 13500 * kTera}},
      {"gb300-288g", {"B300-GB300-288GB", 288 * kGB, 2500 * kTera, 83 * kTera, 8000 * kGB, 5000 * kTera, 15000 * kTera}},
  };
  return table;
}

ClusterSpec node(std::string name, const std::string& gpu, LinkSpec intra, LinkSpec inter,
                 int64_t gpus_per_host = 8, int64_t hosts_per_domain = 1) {
  ClusterSpec c;
  c.name = std::move(name);
  c.gpu = gpus().at(gpu);
  c.gpus_per_node = gpus_per_host;
  c.nodes = 1;
  c.hosts_per_nvlink_domain = hosts_per_domain;
  c.intra = intra;
  c.inter = inter;
  return c;
}

const std::map<std::string, ClusterSpec>& clusters() {
  static const std::map<std::string, ClusterSpec> table = [] {
    std::map<std::string, ClusterSpec> t;
    auto put = [&](ClusterSpec c) { t.emplace(c.name, std::move(c)); };
    const LinkSpec nvlink3{LinkKind::NVLink, 300 * kGB, 3 * kMicro};   // 600 GB/s total, 300 each way
    const LinkSpec nvlink4{LinkKind::NVLink, 450 * kGB, 3 * kMicro};   // 900 GB/s total
    const LinkSpec nvlink5{LinkKind::NVLink, 900 * kGB, 3 * kMicro};   // 1.8 TB/s total
    const LinkSpec pcie4{LinkKind::PCIe, 32 * kGB, 5 * kMicro};        // Gen4 x16
    const LinkSpec hdr8{LinkKind::InfiniBand, 8 * 25 * kGB, 5 * kMicro};   // 8 x 200 Gb/s HDR
    const LinkSpec ndr8{LinkKind::InfiniBand, 8 * 50 * kGB, 5 * kMicro};   // 8 x 400 Gb/s NDR
    const LinkSpec hdr2{LinkKind::InfiniBand, 2 * 25 * kGB, 5 * kMicro};   // 2 x 200 Gb/s HDR
    const LinkSpec gige{LinkKind::Ethernet, 0.125 * kGB, 50 * kMicro};     // one 1 Gb/s port
    put(node("dgx-a100-80g", "a100-80g", nvlink3, hdr8));
    put(node("dgx-a100-40g", "a100-40g", nvlink3, hdr8));
    put(node("dgx-h100", "h100-80g", nvlink4, ndr8));
    put(node("hgx-h200", "h200-141g", nvlink4, ndr8));
    put(node("dgx-b200", "b200-180g", nvlink5, ndr8));  // 8 x ConnectX-7 400 Gb/s
    // GB200 NVL72: 18 compute trays (hosts) of 4 GPUs in one NVLink domain; each tray has 4
    // ConnectX-7 400 Gb/s NICs (200 GB/s) to the next rack. One preset node is one tray.
    put(node("gb200-nvl72", "gb200-186g", nvlink5, {LinkKind::InfiniBand, 4 * 50 * kGB, 5 * kMicro}, 4, 18));
    // Blackwell Ultra: one ConnectX-8 800 Gb/s SuperNIC per GPU (HGX B300: 8 per node; GB300 NVL72:
    // 4 per compute tray of 4 GPUs, 18 trays per NVLink domain as GB200's).
    const LinkSpec xdr8{LinkKind::InfiniBand, 8 * 100 * kGB, 5 * kMicro};  // 8 x 800 Gb/s
    put(node("hgx-b300", "b300-288g", nvlink5, xdr8));
    put(node("gb300-nvl72", "gb300-288g", nvlink5, {LinkKind::InfiniBand, 4 * 100 * kGB, 5 * kMicro}, 4, 18));
    put(node("pcie-a100-40g", "a100-pcie-40g", pcie4, hdr2));
    put(node("gigabit-ethernet", "a100-pcie-40g", pcie4, gige));
    return t;
  }();
  return table;
}

std::vector<std::string> keys_of(const auto& map) {
  std::vector<std::string> names;
  for (const auto& [name, value] : map) names.push_back(name);
  return names;
}

}  // namespace

std::vector<std::string> cluster_preset_names() { return keys_of(clusters()); }
std::vector<std::string> gpu_preset_names() { return keys_of(gpus()); }
bool is_cluster_preset(const std::string& name) { return clusters().count(name) > 0; }
bool is_gpu_preset(const std::string& name) { return gpus().count(name) > 0; }

ClusterSpec cluster_preset(const std::string& name) {
  auto it = clusters().find(name);
  if (it == clusters().end()) {
    Problems p;
    p.add("unknown cluster preset '" + name + "'",
          "use one of " + join_choices(cluster_preset_names()) + ", or describe it in a [cluster] table");
    p.throw_if_any();
  }
  return it->second;
}

GpuSpec gpu_preset(const std::string& name) {
  auto it = gpus().find(name);
  if (it == gpus().end()) {
    Problems p;
    p.add("unknown GPU '" + name + "'", "use one of " + join_choices(gpu_preset_names()));
    p.throw_if_any();
  }
  return it->second;
}

std::string ClusterSpec::describe() const {
  const std::string inside =
      hosts_per_nvlink_domain > 1
          ? fmt::format("inside an NVLink domain of {} hosts x {} GPUs = {} GPUs", hosts_per_nvlink_domain,
                        gpus_per_node, gpus_per_nvlink_domain())
          : "inside a node";
  const std::string between = hosts_per_nvlink_domain > 1 ? "between domains" : "between nodes";
  return fmt::format(
      "{} node{} x {} ({} GPUs of {}: {:.3g} GiB, {:.3g} TFLOP/s bf16); {} {} {:.3g} GB/s "
      "per GPU; {} {} {:.1f} GB/s per node = {:.3g} GB/s per GPU",
      nodes, nodes == 1 ? "" : "s", name, world_size(), gpu.name, gib(gpu.memory_bytes),
      gpu.bf16_flops / kTera, inside, to_string(intra.kind), gbps(intra.bandwidth_Bps), between,
      to_string(inter.kind), gbps(inter.bandwidth_Bps), gbps(inter_bandwidth_per_gpu_Bps()));
}

void validate_cluster(const ClusterSpec& c, Problems& p) {
  if (c.nodes <= 0)
    p.add("--nodes is " + std::to_string(c.nodes) + ", must be positive", "give --nodes 1 or more");
  if (c.gpus_per_node <= 0)
    p.add("--gpus-per-node is " + std::to_string(c.gpus_per_node) + ", must be positive",
          "give --gpus-per-node 1 or more (8 for a DGX)");
  if (c.hosts_per_nvlink_domain <= 0)
    p.add("--hosts-per-nvlink-domain is " + std::to_string(c.hosts_per_nvlink_domain) + ", must be positive",
          "give --hosts-per-nvlink-domain 1 (a DGX) or the hosts sharing one NVLink fabric (18 for GB200 NVL72)");
  if (c.gpu.memory_bytes <= 0) p.add("GPU memory is not positive", "set gpu_memory_gib in [cluster]");
  if (c.gpu.bf16_flops <= 0) p.add("GPU bf16 peak is not positive", "set gpu_bf16_tflops in [cluster]");
  // Every rate divides a size somewhere in the cost model: zero (or NaN) would print an inf or NaN step.
  if (!(c.gpu.fp32_flops > 0))
    p.add(fmt::format("GPU fp32 peak is {} TFLOP/s, must be positive", c.gpu.fp32_flops / kTera),
          "give --gpu-fp32-tflops (gpu-fp32-tflops in [cluster]) a positive value");
  if (!(c.gpu.hbm_Bps > 0))
    p.add(fmt::format("GPU memory bandwidth is {} GB/s, must be positive", c.gpu.hbm_Bps / 1e9),
          "give --gpu-hbm-gbytes-per-s (gpu-hbm-gbytes-per-s in [cluster]) a positive value");
  if (!(c.gpu.fp8_flops >= 0))
    p.add(fmt::format("GPU fp8 peak is {} TFLOP/s, must be 0 (no FP8) or positive", c.gpu.fp8_flops / kTera),
          "give --gpu-fp8-tflops (gpu-fp8-tflops in [cluster]) 0 or a positive value");
  if (!(c.gpu.fp4_flops >= 0))
    p.add(fmt::format("GPU fp4 peak is {} TFLOP/s, must be 0 (no FP4) or positive", c.gpu.fp4_flops / kTera),
          "give --gpu-fp4-tflops (gpu-fp4-tflops in [cluster]) 0 or a positive value");
  if (c.intra.bandwidth_Bps <= 0)
    p.add("intra-node bandwidth is not positive", "set intra_gbytes_per_s in [cluster]");
  if (c.inter.bandwidth_Bps <= 0)
    p.add("inter-node bandwidth is not positive", "set inter_node_gbytes_per_s in [cluster]");
  if (c.intra.latency_s < 0 || c.inter.latency_s < 0)
    p.add("a link latency is negative", "set intra_latency_us and inter_latency_us to 0 or more");
}

}  // namespace trident
