// The strategy <-> topology table: every communication group of a layout on a cluster, with
// the GPUs it holds, the nodes it spans and the link it runs on (the source chapter's review
// practice before every launch).
#pragma once

#include <map>
#include <vector>

#include "core/mesh.h"

namespace trident {

struct TopologyGroup {
  Group group;
  GroupLink link;
  std::vector<int64_t> nodes, domains;  // the nodes and NVLink domains it touches, ascending
};

// All groups of one kind that share a link class, summarised.
struct TopologyRow {
  Dim kind = Dim::TP;
  int64_t group_size = 0;
  LinkKind link = LinkKind::NVLink;
  int64_t groups = 0;                  // how many groups of this kind run on this link
  double bandwidth_Bps = 0;            // the slowest of them
  int64_t min_nodes = 0, max_nodes = 0;  // nodes spanned per group
  int64_t min_domains = 0, max_domains = 0;  // NVLink domains spanned per group
  std::vector<TopologyGroup> examples;   // the first few (or all with list_all)
};

struct TopologyTable {
  int64_t world = 0;
  std::vector<TopologyRow> rows;  // tp, pp, dp, cp, dp-cp, etp, ep, edp; one row per (kind, link class)
};

// Walks every group (O(world) per kind). With list_all each row keeps all its groups,
// otherwise the first `examples` ones. `experts` (a MoE model) adds the expert grid's groups.
TopologyTable build_topology(const Mesh& mesh, const ClusterSpec& cluster, bool list_all, bool experts,
                             int examples = 2);

// "0-7", "0,8,...,56 (step 8)" or "0,3,5": compact, exact text for a rank or node list.
std::string format_ranks(const std::vector<int64_t>& ranks);

}  // namespace trident
