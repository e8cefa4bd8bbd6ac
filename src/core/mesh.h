// Mesh: pure rank arithmetic for a Layout on a cluster.
//
// rank = sum over dims of coord[d] * stride[d], strides built from the order string with the
// fastest dimension first. Every TP/CP/DP/PP group is the set of ranks that differ only in that
// dimension's coordinate. The expert groups (ETP, EP, EDP) are those of a second grid over the
// same ranks, Megatron-Core's expert rank generator: the order string with tp read as etp, dp
// as edp and cp left out (sizes etp, ep, edp = tp cp dp / (etp ep), pp), so every expert group
// is a progression r, r + s, ... too, and its groups fold over attention's tp and cp ranks when
// etp < tp. DCP (the dense gradient group) is all cp x dp data ranks of a (tp, pp) pair, their
// data index j = the cp and dp coordinates as one mixed-radix number (the faster first). The
// node (host) of a rank is
// rank / gpus_per_node, its NVLink domain host / hosts_per_nvlink_domain, and a group's link is
// the slowest link any two of its members use: the NVLink domain's own link while the group
// stays inside one domain, the network once it leaves it. Planner, simulator and runtime all take their groups
// from here, so a prediction and a measurement talk about the same GPUs.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/cluster_spec.h"
#include "core/layout.h"

namespace trident {

struct Coords {
  std::array<int64_t, kNumDims> c{0, 0, 0, 0};  // indexed by Dim
  int64_t& operator[](Dim d) { return c[static_cast<int>(d)]; }
  int64_t operator[](Dim d) const { return c[static_cast<int>(d)]; }
  int64_t tp() const { return (*this)[Dim::TP]; }
  int64_t dp() const { return (*this)[Dim::DP]; }
  int64_t pp() const { return (*this)[Dim::PP]; }
  bool operator==(const Coords&) const = default;
};

struct Group {
  Dim kind = Dim::TP;
  int64_t index = 0;           // 0 .. group_count(kind)-1, numbered by the group's lowest rank
  std::vector<int64_t> ranks;  // ordered by the group's own coordinate (ranks[i] has coord i)
};

struct GroupLink {
  LinkKind kind = LinkKind::NVLink;
  double bandwidth_Bps = 0;       // bottleneck per-GPU bandwidth, per direction
  double latency_s = 0;
  // Counts, not lists: the search reads only how many (the topology table lists them, nodes_of).
  int64_t nodes = 0;    // distinct nodes (hosts) the group touches
  int64_t domains = 0;  // distinct NVLink domains it touches (= nodes unless a domain spans hosts)
  bool crosses_nodes() const { return nodes > 1; }
  // A link built by hand with nodes only has one domain per node.
  int64_t domain_count() const { return domains > 0 ? domains : nodes; }
  bool crosses_domains() const { return domain_count() > 1; }
};

class Mesh {
 public:
  // Throws InputError when the layout is invalid or gpus_per_node is not positive.
  Mesh(const Layout& layout, int64_t gpus_per_node);

  const Layout& layout() const { return layout_; }
  int64_t world_size() const { return world_; }
  int64_t gpus_per_node() const { return gpus_per_node_; }
  int64_t size(Dim d) const { return layout_.size(d); }
  int64_t stride(Dim d) const { return stride_[static_cast<int>(d)]; }

  int64_t rank_of(const Coords& coords) const;
  Coords coords_of(int64_t rank) const;
  int64_t node_of(int64_t rank) const { return rank / gpus_per_node_; }
  int64_t local_rank(int64_t rank) const { return rank % gpus_per_node_; }

  int64_t group_count(Dim d) const { return world_ / size(d); }
  // A rank's coordinate inside its group of kind d (ranks[coord] == rank).
  int64_t coord_in(Dim d, int64_t rank) const;
  // The data index j of a rank (0 .. cp*dp-1), see above.
  int64_t data_index(int64_t rank) const;
  // Members of every group of kind d are r, r + s, ..., r + (size-1) s for this s, or 0 when they
  // are not (a DCP group when cp and dp are not adjacent in the order).
  int64_t group_stride(Dim d) const;
  int64_t group_index_of(Dim d, int64_t rank) const;
  Group group(Dim d, int64_t index) const;
  Group group_of(Dim d, int64_t rank) const { return group(d, group_index_of(d, rank)); }
  std::vector<Group> groups(Dim d) const;

  GroupLink link_of(const std::vector<int64_t>& ranks, const ClusterSpec& cluster) const;
  // The same for the ranks first + j stride (j < n, stride > 0), without listing them.
  GroupLink link_of_progression(int64_t first, int64_t stride, int64_t n, const ClusterSpec& cluster) const;
  // The same for group `index` of kind `kind`, without listing it when its members follow a
  // pattern (a progression, or a DCP group whose gaps repeat with the faster data dimension).
  GroupLink link_of_group(Dim kind, int64_t index, const ClusterSpec& cluster) const;
  // The distinct nodes the ranks sit on, ascending.
  std::vector<int64_t> nodes_of(const std::vector<int64_t>& ranks) const;

 private:
  Layout layout_;
  int64_t gpus_per_node_;
  int64_t world_;
  std::array<int64_t, kNumDims> stride_{};
  std::array<Dim, kNumDims> fastest_first_{};
  Dim data_fast_ = Dim::CP, data_slow_ = Dim::DP;  // the faster and slower of cp and dp
  // The expert grid: ETP, EP, EDP, PP fastest first and the stride of each (indexed like it).
  std::array<Dim, kNumDims> expert_fastest_first_{};
  std::array<int64_t, kNumDims> expert_stride_{};

  int64_t expert_stride(Dim d) const;
  int64_t rank_with_data(Coords c, int64_t j) const;
  // DCP group `index`: the tp and pp coordinates into c.
  void decode_dcp_group(int64_t index, Coords& c) const;
  // The expert grid's group `index` of kind d: its lowest rank.
  int64_t expert_group_base(Dim d, int64_t index) const;
};

}  // namespace trident
