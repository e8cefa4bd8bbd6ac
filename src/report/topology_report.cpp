#include "report/topology_report.h"

#include <fmt/format.h>

#include "core/units.h"

namespace trident {

std::string describe_model(const ModelSpec& m) {
  return fmt::format("{} ({}): {} layers, hidden {}, {} heads ({} kv), ffn {}, seq {}, vocab {} = {:.2f} B parameters",
                     m.name, to_string(m.family), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden,
                     m.seq_len, m.vocab, double(count_parameters(m).total) / 1e9);
}

static std::string example_text(const TopologyGroup& g) {
  return fmt::format("#{}: GPUs {} on node{} {}", g.group.index, format_ranks(g.group.ranks),
                     g.link.nodes.size() == 1 ? "" : "s", format_ranks(g.link.nodes));
}

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
  out += fmt::format("{:<5} {:>7} {:>5}  {:<11} {:>12}  {:<14}  {}\n", "kind", "groups", "size", "link",
                     "GB/s per GPU", "nodes spanned", "example groups");
  for (const TopologyRow& row : table.rows) {
    if (row.group_size == 1) continue;  // a dimension of size 1 has no communication
    std::string nodes = row.min_nodes == row.max_nodes ? std::to_string(row.min_nodes)
                                                       : fmt::format("{}-{}", row.min_nodes, row.max_nodes);
    for (size_t i = 0; i < row.examples.size(); ++i) {
      if (i == 0)
        out += fmt::format("{:<5} {:>7} {:>5}  {:<11} {:>12.4g}  {:<14}  {}\n", to_string(row.kind), row.groups,
                           row.group_size, to_string(row.link), gbps(row.bandwidth_Bps), nodes,
                           example_text(row.examples[i]));
      else
        out += fmt::format("{:<62}  {}\n", "", example_text(row.examples[i]));
    }
    if (int64_t(row.examples.size()) < row.groups)
      out += fmt::format("{:<62}  ... {} more (--all lists every group)\n", "", row.groups - row.examples.size());
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
    out += fmt::format("  stage {}: GPUs {} on node{} {}{}\n", s, format_ranks(tp.ranks),
                       link.nodes.size() == 1 ? "" : "s", format_ranks(link.nodes),
                       l.tp > 1 ? fmt::format(", TP all-reduce over {}", to_string(link.kind)) : "");
    if (s + 1 < l.pp) {
      Coords next = c;
      next[Dim::PP] = s + 1;
      GroupLink hop = mesh.link_of({mesh.rank_of(c), mesh.rank_of(next)}, run.cluster);
      out += fmt::format("     | activations to stage {} over {}\n", s + 1, to_string(hop.kind));
    }
  }
  if (l.dp > 1) {
    Group dp = mesh.group_of(Dim::DP, 0);
    GroupLink link = mesh.link_of(dp.ranks, run.cluster);
    out += fmt::format("  then gradients are averaged over {} replicas (DP group of GPU 0: {}) over {}\n", l.dp,
                       format_ranks(dp.ranks), to_string(link.kind));
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
                        {"nodes", g.link.nodes},
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
                       {"max_nodes", row.max_nodes}});
  const Layout& l = run.layout;
  return {{"world", table.world},
          {"layout", {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"cp", l.cp}, {"order", l.order}}},
          {"summary", summary},
          {"groups", groups}};
}

}  // namespace trident
