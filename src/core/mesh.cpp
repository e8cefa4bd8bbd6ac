#include "core/mesh.h"

#include <algorithm>
#include <numeric>

namespace trident {

namespace {
bool is_dense(Dim d) { return static_cast<int>(d) < kNumDims; }
bool is_expert(Dim d) { return d == Dim::ETP || d == Dim::EP || d == Dim::EDP; }
}  // namespace

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
  bool first_data = true;
  for (Dim d : fastest_first_) {
    stride_[static_cast<int>(d)] = stride;
    stride *= layout.size(d);
    if (d == Dim::CP || d == Dim::DP) {
      (first_data ? data_fast_ : data_slow_) = d;
      first_data = false;
    }
  }
  // Megatron-Core's expert rank generator: the same order over etp, ep, edp and pp.
  expert_fastest_first_ = layout.expert_dims_fastest_first();
  stride = 1;
  for (size_t i = 0; i < expert_fastest_first_.size(); ++i) {
    expert_stride_[i] = stride;
    stride *= layout.size(expert_fastest_first_[i]);
  }
}

int64_t Mesh::expert_stride(Dim d) const {
  for (size_t i = 0; i < expert_fastest_first_.size(); ++i)
    if (expert_fastest_first_[i] == d) return expert_stride_[i];
  return 0;
}

int64_t Mesh::expert_group_base(Dim kind, int64_t index) const {
  // The other expert coordinates as a mixed-radix number, fastest first: groups numbered by their lowest rank.
  int64_t base = 0;
  for (size_t i = 0; i < expert_fastest_first_.size(); ++i) {
    const Dim d = expert_fastest_first_[i];
    if (d == kind) continue;
    base += (index % size(d)) * expert_stride_[i];
    index /= size(d);
  }
  return base;
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

int64_t Mesh::data_index(int64_t rank) const {
  const Coords c = coords_of(rank);
  return c[data_fast_] + size(data_fast_) * c[data_slow_];
}

int64_t Mesh::rank_with_data(Coords c, int64_t j) const {
  c[data_fast_] = j % size(data_fast_);
  c[data_slow_] = j / size(data_fast_);
  return rank_of(c);
}

int64_t Mesh::group_stride(Dim kind) const {
  if (is_dense(kind)) return stride(kind);
  if (is_expert(kind)) return expert_stride(kind);
  const int64_t s = stride(data_fast_);  // DCP: a progression when cp and dp are adjacent
  if (size(data_slow_) > 1 && stride(data_slow_) != s * size(data_fast_)) return 0;
  return s;
}

int64_t Mesh::coord_in(Dim kind, int64_t rank) const {
  if (is_dense(kind)) return coords_of(rank)[kind];
  if (is_expert(kind)) return rank / expert_stride(kind) % size(kind);
  return data_index(rank);  // DCP
}

int64_t Mesh::group_index_of(Dim kind, int64_t rank) const {
  // Mixed-radix number of the other coordinates, fastest first: the dense and expert groups are
  // numbered in the order of their lowest ranks. DCP groups by the tp and pp coordinates.
  if (is_expert(kind)) {
    int64_t index = 0, radix = 1;
    for (Dim d : expert_fastest_first_) {
      if (d == kind) continue;
      index += rank / expert_stride(d) % size(d) * radix;  // the expert grid's own pp coordinate too
      radix *= size(d);
    }
    return index;
  }
  Coords c = coords_of(rank);
  int64_t index = 0, radix = 1;
  if (is_dense(kind)) {
    for (Dim d : fastest_first_) {
      if (d == kind) continue;
      index += c[d] * radix;
      radix *= size(d);
    }
    return index;
  }
  for (Dim d : fastest_first_) {
    if (d == Dim::CP || d == Dim::DP) continue;
    index += c[d] * radix;
    radix *= size(d);
  }
  return index;
}

Group Mesh::group(Dim kind, int64_t index) const {
  Group g;
  g.kind = kind;
  g.ranks.reserve(size(kind));
  Coords c;
  if (is_dense(kind)) {
    for (Dim d : fastest_first_) {
      if (d == kind) continue;
      c[d] = index % size(d);
      index /= size(d);
    }
    for (int64_t i = 0; i < size(kind); ++i) {
      c[kind] = i;
      g.ranks.push_back(rank_of(c));
    }
    c[kind] = 0;
    g.index = group_index_of(kind, rank_of(c));
    return g;
  }
  g.index = index;
  if (is_expert(kind)) {
    const int64_t base = expert_group_base(kind, index), s = expert_stride(kind);
    for (int64_t i = 0; i < size(kind); ++i) g.ranks.push_back(base + i * s);
    return g;
  }
  decode_dcp_group(index, c);
  for (int64_t j = 0; j < size(kind); ++j) g.ranks.push_back(rank_with_data(c, j));
  return g;
}

void Mesh::decode_dcp_group(int64_t index, Coords& c) const {
  // The mixed-radix number group_index_of builds over the tp and pp coordinates.
  for (Dim d : fastest_first_) {
    if (d == Dim::CP || d == Dim::DP) continue;
    c[d] = index % size(d);
    index /= size(d);
  }
}

std::vector<Group> Mesh::groups(Dim kind) const {
  std::vector<Group> out;
  out.reserve(group_count(kind));
  for (int64_t i = 0; i < group_count(kind); ++i) out.push_back(group(kind, i));
  return out;
}

namespace {

// The link of a group touching `nodes` nodes in `domains` NVLink domains.
GroupLink link_for(int64_t nodes, int64_t domains, const ClusterSpec& cluster) {
  GroupLink link;
  link.nodes = nodes;
  link.domains = domains;
  if (domains <= 1) {
    // One NVLink domain: every GPU reaches every other on its own NVLink ports, even across
    // hosts (GB200 NVL72: 18 hosts share the NVSwitch trays of one rack).
    link.kind = cluster.intra.kind;
    link.bandwidth_Bps = cluster.intra.bandwidth_Bps;
    link.latency_s = cluster.intra.latency_s;
  } else {
    // Past the domain boundary every byte crosses a NIC shared by the host's GPUs.
    link.kind = cluster.inter.kind;
    link.bandwidth_Bps = std::min(cluster.intra.bandwidth_Bps, cluster.inter_bandwidth_per_gpu_Bps());
    link.latency_s = std::max(cluster.intra.latency_s, cluster.inter.latency_s);
  }
  return link;
}

// Counts the distinct nodes and domains of ascending node numbers, fed one at a time.
struct SpanCounter {
  int64_t hosts_per_domain, nodes = 0, domains = 0, last_node = -1, last_domain = -1;
  void add(int64_t node) {
    if (node == last_node) return;
    ++nodes, last_node = node;
    if (node / hosts_per_domain != last_domain) ++domains, last_domain = node / hosts_per_domain;
  }
};

}  // namespace

std::vector<int64_t> Mesh::nodes_of(const std::vector<int64_t>& ranks) const {
  std::vector<int64_t> nodes;
  nodes.reserve(ranks.size());
  for (int64_t r : ranks) nodes.push_back(node_of(r));
  // Groups list their ranks ascending almost always: sort only when they do not.
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

GroupLink Mesh::link_of(const std::vector<int64_t>& ranks, const ClusterSpec& cluster) const {
  SpanCounter c{std::max<int64_t>(cluster.hosts_per_nvlink_domain, 1)};
  bool ascending = true;
  for (size_t i = 0; i < ranks.size() && ascending; ++i) {
    ascending = i == 0 || ranks[i] >= ranks[i - 1];
    if (ascending) c.add(node_of(ranks[i]));
  }
  if (!ascending) {  // count over the sorted node list instead
    c = SpanCounter{c.hosts_per_domain};
    for (int64_t n : nodes_of(ranks)) c.add(n);
  }
  return link_for(c.nodes, c.domains, cluster);
}

namespace {
// Distinct values of floor((first + j stride) / block) for j < n (stride > 0): each member lands
// in a block of its own when the stride spans a block; otherwise no block between the first
// member's and the last's is skipped. Arithmetic, so a group of 10^5 ranks costs what one of 2 does.
int64_t blocks_spanned(int64_t first, int64_t stride, int64_t n, int64_t block) {
  if (n <= 1) return std::max<int64_t>(n, 0);
  if (stride >= block) return n;
  return (first + (n - 1) * stride) / block - first / block + 1;
}

// Distinct values of member(i) / block over i < n, for members that ascend with gaps repeating
// every T (member(i + T) - member(i) = D for all i): whether member i starts a new block depends
// on member(i - 1) mod block and the gap, which repeat every L = T x block / gcd(D, block)
// members, so one repeat is counted and multiplied.
template <class Member>
int64_t blocks_of_repeating(const Member& member, int64_t n, int64_t T, int64_t block) {
  auto starts_block = [&](int64_t i) { return member(i) / block != member(i - 1) / block; };
  const int64_t steps = n - 1;
  int64_t count = 1;
  if (steps <= 2 * T * block) {
    for (int64_t i = 1; i <= steps; ++i) count += starts_block(i);
    return count;
  }
  const int64_t L = T * (block / std::gcd((member(T) - member(0)) % block, block));
  int64_t per_repeat = 0, rest = 0;
  for (int64_t i = 1; i <= L; ++i) per_repeat += starts_block(i);
  for (int64_t i = 1; i <= steps % L; ++i) rest += starts_block(i);
  return count + steps / L * per_repeat + rest;
}
}  // namespace

GroupLink Mesh::link_of_group(Dim kind, int64_t index, const ClusterSpec& cluster) const {
  const int64_t n = size(kind);
  if (is_dense(kind) || n <= 1) return link_of(group(kind, index).ranks, cluster);
  if (is_expert(kind)) return link_of_progression(expert_group_base(kind, index), expert_stride(kind), n, cluster);
  Coords c;
  decode_dcp_group(index, c);
  auto member = [&](int64_t j) { return rank_with_data(c, j); };
  // Member j's rank is a fixed part + (j mod F) s_fast + (j div F) s_slow: the gaps depend on
  // j mod F alone and repeat every T = F members.
  const int64_t F = size(data_fast_), T = F;
  bool ascending = T > 0;
  for (int64_t i = 1; i <= std::min(T, n - 1) && ascending; ++i) ascending = member(i) > member(i - 1);
  if (!ascending) return link_of(group(kind, index).ranks, cluster);
  const int64_t hosts = std::max<int64_t>(cluster.hosts_per_nvlink_domain, 1);
  return link_for(blocks_of_repeating(member, n, T, gpus_per_node_),
                  blocks_of_repeating(member, n, T, gpus_per_node_ * hosts), cluster);
}

GroupLink Mesh::link_of_progression(int64_t first, int64_t stride, int64_t n, const ClusterSpec& cluster) const {
  const int64_t hosts = std::max<int64_t>(cluster.hosts_per_nvlink_domain, 1);
  return link_for(blocks_spanned(first, stride, n, gpus_per_node_),
                  blocks_spanned(first, stride, n, gpus_per_node_ * hosts), cluster);
}

}  // namespace trident
