#include "report/catalog_report.h"

#include <fmt/format.h>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/units.h"

namespace trident {
namespace {

std::string experts_text(const ModelSpec& m) {
  if (!m.is_moe()) return "-";
  std::string s = fmt::format("{} top-{}", m.experts, m.experts_per_token);
  if (m.shared_experts > 0) s += fmt::format(" +{} shared", m.shared_experts);
  return s;
}

double billions(int64_t n) { return double(n) / 1e9; }

}  // namespace

nlohmann::json models_json() {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : model_preset_names()) {
    const ModelSpec m = model_preset(name);
    const ParamCount pc = count_parameters(m);
    rows.push_back({{"name", name},
                    {"family", to_string(m.family)},
                    {"layers", m.layers},
                    {"hidden", m.hidden},
                    {"heads", m.heads},
                    {"kv_heads", m.kv_heads},
                    {"head_dim", m.head_dim()},
                    {"ffn_hidden", m.ffn_hidden},
                    {"experts", m.experts},
                    {"experts_per_token", m.experts_per_token},
                    {"expert_ffn_hidden", m.expert_ffn_hidden},
                    {"shared_experts", m.shared_experts},
                    {"vocab", m.vocab},
                    {"seq_len", m.seq_len},
                    {"params_total", pc.total},
                    {"params_active", pc.active}});
  }
  return {{"models", rows}};
}

std::string models_text() {
  std::string s = fmt::format("{:<18} {:<6} {:>6} {:>6} {:>9} {:>5} {:>6} {:>17} {:>7} {:>6} {:>9} {:>9}\n", "model",
                              "family", "layers", "hidden", "heads/kv", "head", "ffn", "experts", "vocab", "seq",
                              "total B", "active B");
  for (const std::string& name : model_preset_names()) {
    const ModelSpec m = model_preset(name);
    const ParamCount pc = count_parameters(m);
    s += fmt::format("{:<18} {:<6} {:>6} {:>6} {:>9} {:>5} {:>6} {:>17} {:>7} {:>6} {:>9.3f} {:>9.3f}\n", name,
                     to_string(m.family), m.layers, m.hidden, fmt::format("{}/{}", m.heads, m.kv_heads), m.head_dim(),
                     m.is_moe() ? m.expert_ffn_hidden : m.ffn_hidden, experts_text(m), m.vocab, m.seq_len,
                     billions(pc.total), billions(pc.active));
  }
  s += "ffn: the MLP's width (a MoE model: one expert's). Parameters as `plan` counts them, term by term in its\n"
       "start-up table. Any other model: --hf-config config.json (a Hugging Face config) or --layers --hidden --heads.\n";
  return s;
}

nlohmann::json clusters_json() {
  nlohmann::json clusters = nlohmann::json::array(), gpus = nlohmann::json::array();
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    clusters.push_back({{"name", name},
                        {"gpu", c.gpu.name},
                        {"gpus_per_node", c.gpus_per_node},
                        {"hosts_per_nvlink_domain", c.hosts_per_nvlink_domain},
                        {"gpus_per_nvlink_domain", c.gpus_per_nvlink_domain()},
                        {"intra_link", to_string(c.intra.kind)},
                        {"intra_gbps_per_gpu", gbps(c.intra.bandwidth_Bps)},
                        {"intra_latency_us", c.intra.latency_s / kMicro},
                        {"inter_link", to_string(c.inter.kind)},
                        {"inter_gbps_per_node", gbps(c.inter.bandwidth_Bps)},
                        {"inter_gbps_per_gpu", gbps(c.inter_bandwidth_per_gpu_Bps())},
                        {"inter_latency_us", c.inter.latency_s / kMicro}});
  }
  for (const std::string& name : gpu_preset_names()) {
    const GpuSpec g = gpu_preset(name);
    gpus.push_back({{"name", name},
                    {"gpu", g.name},
                    {"memory_gib", gib(g.memory_bytes)},
                    {"bf16_tflops", g.bf16_flops / kTera},
                    {"fp8_tflops", g.fp8_flops / kTera},
                    {"fp4_tflops", g.fp4_flops / kTera},
                    {"fp32_tflops", g.fp32_flops / kTera},
                    {"hbm_gbps", gbps(g.hbm_Bps)}});
  }
  return {{"clusters", clusters}, {"gpus", gpus}};
}

std::string clusters_text() {
  std::string s = fmt::format("{:<18} {:<18} {:>9} {:>13} {:>22} {:>30}\n", "cluster (one node)", "GPU", "GPUs/node",
                              "NVLink domain", "inside, GB/s per GPU", "between, GB/s per node (GPU)");
  for (const std::string& name : cluster_preset_names()) {
    const ClusterSpec c = cluster_preset(name);
    s += fmt::format("{:<18} {:<18} {:>9} {:>13} {:>22} {:>30}\n", name, c.gpu.name, c.gpus_per_node,
                     fmt::format("{} GPUs", c.gpus_per_nvlink_domain()),
                     fmt::format("{} {:.4g}", to_string(c.intra.kind), gbps(c.intra.bandwidth_Bps)),
                     fmt::format("{} {:.4g} ({:.4g})", to_string(c.inter.kind), gbps(c.inter.bandwidth_Bps),
                                 gbps(c.inter_bandwidth_per_gpu_Bps())));
  }
  s += "\n" + fmt::format("{:<14} {:<18} {:>10} {:>12} {:>11} {:>11} {:>12} {:>9}\n", "GPU", "name", "memory GiB",
                          "bf16 TFLOP/s", "fp8 TFLOP/s", "fp4 TFLOP/s", "fp32 TFLOP/s", "HBM GB/s");
  for (const std::string& name : gpu_preset_names()) {
    const GpuSpec g = gpu_preset(name);
    s += fmt::format("{:<14} {:<18} {:>10.1f} {:>12.0f} {:>11} {:>11} {:>12.1f} {:>9.0f}\n", name, g.name, gib(g.memory_bytes),
                     g.bf16_flops / kTera, g.fp8_flops > 0 ? fmt::format("{:.0f}", g.fp8_flops / kTera) : "-",
                     g.fp4_flops > 0 ? fmt::format("{:.0f}", g.fp4_flops / kTera) : "-",
                     g.fp32_flops / kTera, gbps(g.hbm_Bps));
  }
  s += "Peaks are dense (no sparsity), per GPU, from the vendors' datasheets (src/core/cluster_spec.cpp names each).\n"
       "Use one with --cluster NAME --nodes N, or --gpu NAME with your own links (--help of plan), or a [cluster] table.\n";
  return s;
}

}  // namespace trident
