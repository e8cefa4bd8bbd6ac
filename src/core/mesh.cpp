#include "core/mesh.h"

#include <algorithm>

namespace trident {

Mesh::Mesh(const Layout& layout, int64_t gpus_per_node) : layout_(layout), gpus_per_node_(gpus_per_node) {
  Problems p;
  validate_layout(layout, p);
  if (gpus_per_node <= 0)
    p.add("gpus per node is " + std::to_string(gpus_per_node) + ", must be positive",
          "give --gpus-per-node 1 or more");
  p.throw_if_any();
  world_ = layout.world_size();
  fastest_first_ = layout.dims_fastest_first();
  int64_t stride = 1;
  for (Dim d : fastest_first_) {
    stride_[static_cast<int>(d)] = stride;
    stride *= layout.size(d);
  }
}

int64_t Mesh::rank_of(const Coords& coords) const {
  int64_t rank = 0;
  for (int d = 0; d < kNumDims; ++d) rank += coords.c[d] * stride_[d];
  return rank;
}

Coords Mesh::coords_of(int64_t rank) const {
  Coords out;
  for (Dim d : fastest_first_) {
    out[d] = rank % size(d);
    rank /= size(d);
  }
  return out;
}

int64_t Mesh::group_index_of(Dim kind, int64_t rank) const {
  // Mixed-radix number of the other coordinates, fastest first: the groups are numbered in the
  // order of their lowest ranks.
  Coords c = coords_of(rank);
  int64_t index = 0, radix = 1;
  for (Dim d : fastest_first_) {
    if (d == kind) continue;
    index += c[d] * radix;
    radix *= size(d);
  }
  return index;
}

Group Mesh::group(Dim kind, int64_t index) const {
  Coords c;
  for (Dim d : fastest_first_) {
    if (d == kind) continue;
    c[d] = index % size(d);
    index /= size(d);
  }
  Group g;
  g.kind = kind;
  g.ranks.reserve(size(kind));
  for (int64_t i = 0; i < size(kind); ++i) {
    c[kind] = i;
    g.ranks.push_back(rank_of(c));
  }
  c[kind] = 0;
  g.index = group_index_of(kind, rank_of(c));
  return g;
}

std::vector<Group> Mesh::groups(Dim kind) const {
  std::vector<Group> out;
  out.reserve(group_count(kind));
  for (int64_t i = 0; i < group_count(kind); ++i) out.push_back(group(kind, i));
  return out;
}

GroupLink Mesh::link_of(const std::vector<int64_t>& ranks, const ClusterSpec& cluster) const {
  GroupLink link;
  for (int64_t r : ranks) link.nodes.push_back(node_of(r));
  std::sort(link.nodes.begin(), link.nodes.end());
  link.nodes.erase(std::unique(link.nodes.begin(), link.nodes.end()), link.nodes.end());
  if (link.nodes.size() <= 1) {
    link.kind = cluster.intra.kind;
    link.bandwidth_Bps = cluster.intra.bandwidth_Bps;
    link.latency_s = cluster.intra.latency_s;
  } else {
    // Past the node boundary every byte crosses a NIC shared by the node's GPUs.
    link.kind = cluster.inter.kind;
    link.bandwidth_Bps = std::min(cluster.intra.bandwidth_Bps, cluster.inter_bandwidth_per_gpu_Bps());
    link.latency_s = std::max(cluster.intra.latency_s, cluster.inter.latency_s);
  }
  return link;
}

}  // namespace trident
