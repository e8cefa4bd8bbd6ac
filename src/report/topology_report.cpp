#include "report/topology_report.h"

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/units.h"

namespace trident {

std::string describe_model(const ModelSpec& m) {
  const ParamCount pc = count_parameters(m);
  std::string moe;
  if (m.is_moe())
    moe = fmt::format(", {} experts of ffn {} (top-{}{}{}{}), capacity factor {:g}", m.experts, m.expert_ffn_hidden,
                      m.experts_per_token, m.shared_experts > 0 ? fmt::format(", {} shared", m.shared_experts) : "",
                      m.moe_dense_layers > 0 ? fmt::format(", first {} layers dense", m.moe_dense_layers) : "",
                      m.moe_layer_freq > 1 ? fmt::format(", one layer in {} MoE", m.moe_layer_freq) : "",
                      m.capacity_factor);
  std::string arch;
  for (const auto& b : m.beyond_family()) arch += ", " + b;
  return fmt::format("{} ({}): {} layers, hidden {}, {} heads ({} kv){}, ffn {}{}, seq {}, vocab {} = {:.2f} B parameters{}",
                     m.name, to_string(m.family), m.layers, m.hidden, m.heads, m.kv_heads, arch, m.ffn_hidden, moe,
                     m.seq_len, m.vocab, double(pc.total) / 1e9,
                     m.is_moe() ? fmt::format(" ({:.2f} B active per token)", double(pc.active) / 1e9) : "");
}

static std::string example_text(const TopologyGroup& g, bool show_domains) {
  return fmt::format("#{}: GPUs {} on node{} {}{}", g.group.index, format_ranks(g.group.ranks),
                     g.nodes.size() == 1 ? "" : "s", format_ranks(g.nodes),
                     show_domains ? fmt::format(" (NVLink domain{} {})", g.domains.size() == 1 ? "" : "s",
                                                format_ranks(g.domains))
                                  : "");
}

static std::string span(int64_t lo, int64_t hi) { return lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi); }

std::string topology_text(const RunSpec& run, const Mesh& mesh, const TopologyTable& table) {
  const Layout& l = run.layout;
  std::string out;
  out += "Strategy <-> topology table\n";
  out += "  model    " + describe_model(run.model) + "\n";
  out += "  cluster  " + run.cluster.describe() + "\n";
  out += fmt::format("  layout   {} = {} GPUs; rank = ", l.describe(), mesh.world_size());
  {
    std::string formula;
    for (Dim d : l.dims_fastest_first()) {
      if (mesh.size(d) == 1) continue;
      if (!formula.empty()) formula += " + ";
      formula += mesh.stride(d) == 1 ? to_string(d) : fmt::format("{}*{}", mesh.stride(d), to_string(d));
    }
    out += (formula.empty() ? "0" : formula) + "\n\n";
  }
  // NVLink domains get their own column when one spans hosts (GB200 NVL72); otherwise a domain is a node.
  const bool domains = run.cluster.hosts_per_nvlink_domain > 1;
  out += fmt::format("{:<5} {:>7} {:>5}  {:<11} {:>12}  {:<14}  {}{}\n", "kind", "groups", "size", "link",
                     "GB/s per GPU", "nodes spanned", domains ? fmt::format("{:<12}  ", "NVL domains") : "",
                     "example groups");
  const int pad = domains ? 76 : 62;
  for (const TopologyRow& row : table.rows) {
    if (row.group_size == 1) continue;  // a dimension of size 1 has no communication
    const std::string nodes = span(row.min_nodes, row.max_nodes);
    const std::string doms = domains ? fmt::format("{:<12}  ", span(row.min_domains, row.max_domains)) : "";
    for (size_t i = 0; i < row.examples.size(); ++i) {
      if (i == 0)
        out += fmt::format("{:<5} {:>7} {:>5}  {:<11} {:>12.4g}  {:<14}  {}{}\n", to_string(row.kind), row.groups,
                           row.group_size, to_string(row.link), gbps(row.bandwidth_Bps), nodes, doms,
                           example_text(row.examples[i], domains));
      else
        out += fmt::format("{:<{}}  {}\n", "", pad, example_text(row.examples[i], domains));
    }
    if (int64_t(row.examples.size()) < row.groups)
      out += fmt::format("{:<{}}  ... {} more (--all lists every group)\n", "", pad, row.groups - row.examples.size());
  }
  // The data path of replica 0 through the pipeline, as the source chapter draws it.
  out += "\nData path of replica 0 (forward; backward runs it in reverse):\n";
  Coords c;
  for (int64_t s = 0; s < l.pp; ++s) {
    c[Dim::PP] = s;
    c[Dim::DP] = 0;
    c[Dim::TP] = 0;
    Group tp = mesh.group_of(Dim::TP, mesh.rank_of(c));
    GroupLink link = mesh.link_of(tp.ranks, run.cluster);
    const std::vector<int64_t> nodes = mesh.nodes_of(tp.ranks);
    out += fmt::format("  stage {}: GPUs {} on node{} {}{}\n", s, format_ranks(tp.ranks),
                       nodes.size() == 1 ? "" : "s", format_ranks(nodes),
                       l.tp > 1 ? fmt::format(", TP all-reduce over {}", to_string(link.kind)) : "");
    if (s + 1 < l.pp) {
      Coords next = c;
      next[Dim::PP] = s + 1;
      GroupLink hop = mesh.link_of({mesh.rank_of(c), mesh.rank_of(next)}, run.cluster);
      out += fmt::format("     | activations to stage {} over {}\n", s + 1, to_string(hop.kind));
    }
  }
  if (l.cp > 1) {
    Group cp = mesh.group_of(Dim::CP, 0);
    GroupLink link = mesh.link_of(cp.ranks, run.cluster);
    out += fmt::format("  in every layer the sequence is split over {} cp ranks (CP group of GPU 0: {}), which pass "
                       "their key/value blocks round a ring over {}\n",
                       l.cp, format_ranks(cp.ranks), to_string(link.kind));
  }
  if (run.model.is_moe() && (l.ep > 1 || l.etp > 1)) {
    // The expert grid lays the stage's ranks out again (Megatron-Core's expert rank generator).
    Group ep = mesh.group_of(Dim::EP, 0);
    GroupLink link = mesh.link_of(ep.ranks, run.cluster);
    const std::string fold = l.etp == l.tp ? "" : fmt::format(", folded over attention's tp {}", l.tp);
    out += fmt::format("  in every MoE layer tokens go to their experts and back by all-to-all over {} ep ranks (EP "
                       "group of GPU 0: {}{}) over {}\n",
                       l.ep, format_ranks(ep.ranks), fold, to_string(link.kind));
    if (l.etp > 1) {
      Group etp = mesh.group_of(Dim::ETP, 0);
      out += fmt::format("  each expert is split over {} etp ranks (ETP group of GPU 0: {}) over {}\n", l.etp,
                         format_ranks(etp.ranks), to_string(mesh.link_of(etp.ranks, run.cluster).kind));
    }
  }
  if (l.dp * l.cp > 1) {
    const Dim grad = l.cp > 1 ? Dim::DCP : Dim::DP;
    Group dp = mesh.group_of(grad, 0);
    GroupLink link = mesh.link_of(dp.ranks, run.cluster);
    out += fmt::format("  then gradients are averaged over {} replicas{} ({} group of GPU 0: {}) over {}\n", l.dp,
                       l.cp > 1 ? fmt::format(" x {} cp ranks", l.cp) : "", l.cp > 1 ? "DP x CP" : "DP",
                       format_ranks(dp.ranks), to_string(link.kind));
    if (run.model.is_moe() && mesh.size(Dim::EDP) > 1 && (l.ep > 1 || l.etp != l.tp)) {
      Group edp = mesh.group_of(Dim::EDP, 0);
      GroupLink elink = mesh.link_of(edp.ranks, run.cluster);
      out += fmt::format("  and expert gradients over the {} ranks holding the same experts (EDP group of GPU 0: {}) "
                         "over {}\n",
                         edp.ranks.size(), format_ranks(edp.ranks), to_string(elink.kind));
    }
  }
  return out;
}

nlohmann::json topology_json(const RunSpec& run, const TopologyTable& table) {
  nlohmann::json groups = nlohmann::json::array();
  for (const TopologyRow& row : table.rows)
    for (const TopologyGroup& g : row.examples)
      groups.push_back({{"kind", to_string(row.kind)},
                        {"index", g.group.index},
                        {"ranks", g.group.ranks},
                        {"nodes", g.nodes},
                        {"nvlink_domains", g.domains},
                        {"link", to_string(g.link.kind)},
                        {"bandwidth_gbps", gbps(g.link.bandwidth_Bps)}});
  nlohmann::json summary = nlohmann::json::array();
  for (const TopologyRow& row : table.rows)
    summary.push_back({{"kind", to_string(row.kind)},
                       {"groups", row.groups},
                       {"size", row.group_size},
                       {"link", to_string(row.link)},
                       {"bandwidth_gbps", gbps(row.bandwidth_Bps)},
                       {"min_nodes", row.min_nodes},
                       {"max_nodes", row.max_nodes},
                       {"min_nvlink_domains", row.min_domains},
                       {"max_nvlink_domains", row.max_domains}});
  const Layout& l = run.layout;
  return {{"world", table.world},
          {"layout", layout_json(l)},
          {"hosts_per_nvlink_domain", run.cluster.hosts_per_nvlink_domain},
          {"summary", summary},
          {"groups", groups}};
}

}  // namespace trident
