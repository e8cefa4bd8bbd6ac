// Mesh: pure rank arithmetic for a Layout on a cluster.
//
// rank = sum over dims of coord[d] * stride[d], strides built from the order string with the
// fastest dimension first. Every TP/CP/DP/PP group is the set of ranks that differ only in that
// dimension's coordinate. The node of a rank is rank / gpus_per_node, and a group's link is the
// slowest link any two of its members use. Planner, simulator and runtime all take their groups
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
  std::vector<int64_t> nodes;     // distinct nodes the group touches, ascending
  bool crosses_nodes() const { return nodes.size() > 1; }
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
  int64_t group_index_of(Dim d, int64_t rank) const;
  Group group(Dim d, int64_t index) const;
  Group group_of(Dim d, int64_t rank) const { return group(d, group_index_of(d, rank)); }
  std::vector<Group> groups(Dim d) const;

  GroupLink link_of(const std::vector<int64_t>& ranks, const ClusterSpec& cluster) const;

 private:
  Layout layout_;
  int64_t gpus_per_node_;
  int64_t world_;
  std::array<int64_t, kNumDims> stride_{};
  std::array<Dim, kNumDims> fastest_first_{};
};

}  // namespace trident
