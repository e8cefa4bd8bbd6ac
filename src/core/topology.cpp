#include "core/topology.h"

#include <fmt/format.h>

namespace trident {

std::string format_ranks(const std::vector<int64_t>& r) {
  if (r.empty()) return "";
  if (r.size() == 1) return std::to_string(r[0]);
  const int64_t step = r[1] - r[0];
  bool arithmetic = step > 0;
  for (size_t i = 2; i < r.size() && arithmetic; ++i) arithmetic = r[i] - r[i - 1] == step;
  if (arithmetic && step == 1) return fmt::format("{}-{}", r.front(), r.back());
  if (arithmetic && r.size() > 4) return fmt::format("{},{},...,{} (step {})", r[0], r[1], r.back(), step);
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) {
    if (i == 8 && r.size() > 10) {
      s += fmt::format(",... ({} in all)", r.size());
      break;
    }
    s += (i ? "," : "") + std::to_string(r[i]);
  }
  return s;
}

TopologyTable build_topology(const Mesh& mesh, const ClusterSpec& cluster, bool list_all, bool experts, int examples) {
  TopologyTable table;
  table.world = mesh.world_size();
  // cp and its dense gradient group (dp x cp) only exist with cp > 1; the expert grid's groups
  // with experts: etp and ep above 1, edp always (folded over tp it is no dense group).
  const bool cp = mesh.size(Dim::CP) > 1;
  const int64_t hosts_per_domain = std::max<int64_t>(cluster.hosts_per_nvlink_domain, 1);
  for (Dim kind : {Dim::TP, Dim::PP, Dim::DP, Dim::CP, Dim::DCP, Dim::ETP, Dim::EP, Dim::EDP}) {
    if ((kind == Dim::CP || kind == Dim::DCP) && !cp) continue;
    if ((kind == Dim::ETP || kind == Dim::EP || kind == Dim::EDP) && !experts) continue;
    if ((kind == Dim::ETP || kind == Dim::EP) && mesh.size(kind) <= 1) continue;
    std::map<LinkKind, TopologyRow> by_link;
    for (int64_t i = 0; i < mesh.group_count(kind); ++i) {
      TopologyGroup g{mesh.group(kind, i), {}, {}, {}};
      g.link = mesh.link_of(g.group.ranks, cluster);
      auto [it, fresh] = by_link.try_emplace(g.link.kind);
      TopologyRow& row = it->second;
      const int64_t nodes = g.link.nodes, domains = g.link.domain_count();
      if (fresh) {
        row.kind = kind;
        row.group_size = mesh.size(kind);
        row.link = g.link.kind;
        row.bandwidth_Bps = g.link.bandwidth_Bps;
        row.min_nodes = row.max_nodes = nodes;
        row.min_domains = row.max_domains = domains;
      }
      row.groups++;
      row.bandwidth_Bps = std::min(row.bandwidth_Bps, g.link.bandwidth_Bps);
      row.min_nodes = std::min(row.min_nodes, nodes);
      row.max_nodes = std::max(row.max_nodes, nodes);
      row.min_domains = std::min(row.min_domains, domains);
      row.max_domains = std::max(row.max_domains, domains);
      if (list_all || int(row.examples.size()) < examples) {
        g.nodes = mesh.nodes_of(g.group.ranks);
        for (int64_t n : g.nodes)
          if (g.domains.empty() || g.domains.back() != n / hosts_per_domain) g.domains.push_back(n / hosts_per_domain);
        row.examples.push_back(std::move(g));
      }
    }
    for (auto& [link, row] : by_link) table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace trident
