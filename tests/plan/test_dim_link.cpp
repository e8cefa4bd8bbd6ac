// Group links computed from the sizes (dim_link) against a walk over every rank of every group
// (the brute-force reference kept here), for many sizes, orders and clusters, GB200 NVL72
// domains (72 GPUs over 18 hosts of 4, a boundary no power-of-two stride lines up with) included.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "plan/dim_link.h"

using namespace trident;
using namespace trident::plan;

namespace {

// The reference: build every group, map its ranks to domains, count.
DimLink walked_dim_link(const Mesh& mesh, Dim dim, const ClusterSpec& cluster) {
  DimLink out;
  out.groups = mesh.group_count(dim);
  const int64_t gpd = cluster.gpus_per_nvlink_domain();
  int64_t first_crossing = -1, first_rank = -1;
  for (int64_t i = 0; i < out.groups; ++i) {
    const Group g = mesh.group(dim, i);
    std::vector<int64_t> domains;
    for (int64_t r : g.ranks) domains.push_back(r / gpd);
    std::sort(domains.begin(), domains.end());
    int64_t most = 0, run = 0;
    for (size_t j = 0; j < domains.size(); ++j) {
      run = j > 0 && domains[j] == domains[j - 1] ? run + 1 : 1;
      most = std::max(most, run);
    }
    out.members_per_node = std::max(out.members_per_node, most);
    if (domains.front() != domains.back()) {
      ++out.groups_crossing_domains;
      const int64_t lowest = *std::min_element(g.ranks.begin(), g.ranks.end());
      if (first_crossing < 0 || (mesh.group_stride(dim) != 0 && lowest < first_rank)) {
        first_crossing = i;
        first_rank = lowest;
      }
    }
  }
  out.link = mesh.link_of(mesh.group(dim, std::max<int64_t>(first_crossing, 0)).ranks, cluster);
  return out;
}

ClusterSpec cluster(const std::string& preset, int64_t gpus_per_node, int64_t hosts_per_domain) {
  ClusterSpec c = cluster_preset(preset);
  c.gpus_per_node = gpus_per_node;
  c.hosts_per_nvlink_domain = hosts_per_domain;
  return c;
}

// Every order of tp, cp, dp, pp with ep at each place.
std::vector<std::string> all_orders() {
  std::vector<std::string> dims = {"cp", "dp", "pp", "tp"}, out;
  do {
    for (size_t at = 0; at <= dims.size(); ++at) {
      std::vector<std::string> t = dims;
      t.insert(t.begin() + long(at), "ep");
      std::string s;
      for (const auto& x : t) s += (s.empty() ? "" : "-") + x;
      out.push_back(s);
    }
  } while (std::next_permutation(dims.begin(), dims.end()));
  return out;
}

void expect_same(const DimLink& a, const DimLink& b, const std::string& what) {
  EXPECT_EQ(a.groups, b.groups) << what;
  EXPECT_EQ(a.members_per_node, b.members_per_node) << what;
  EXPECT_EQ(a.groups_crossing_domains, b.groups_crossing_domains) << what;
  EXPECT_EQ(int(a.link.kind), int(b.link.kind)) << what;
  EXPECT_EQ(a.link.bandwidth_Bps, b.link.bandwidth_Bps) << what;
  EXPECT_EQ(a.link.latency_s, b.link.latency_s) << what;
  EXPECT_EQ(a.link.nodes, b.link.nodes) << what;
  EXPECT_EQ(a.link.domains, b.link.domains) << what;
}

}  // namespace

TEST(DimLink, arithmetic_links_match_the_rank_walk_for_many_layouts_orders_and_clusters) {
  const std::vector<ClusterSpec> clusters = {
      cluster("dgx-a100-80g", 8, 1), cluster("gb200-nvl72", 4, 18), cluster("dgx-a100-80g", 4, 2),
      cluster("dgx-a100-80g", 3, 1), cluster("dgx-a100-80g", 1, 1), cluster("gb200-nvl72", 6, 3),
      cluster("dgx-a100-80g", 16, 1), cluster("gb200-nvl72", 4, 18), cluster("gb200-nvl72", 4, 18)};
  const std::vector<std::string> orders = all_orders();
  const std::vector<int64_t> sizes = {1, 2, 3, 4, 6, 8, 12, 16, 18, 24, 32, 36, 48};
  std::mt19937 rng(20260101);
  auto pick = [&](const std::vector<int64_t>& v) { return v[rng() % v.size()]; };
  int compared = 0, crossing = 0;
  for (int k = 0; k < 4000; ++k) {
    const int64_t tp = pick({1, 2, 4, 8, 3, 16}), cp = pick({1, 1, 2, 3, 4}), dp = pick(sizes), pp = pick({1, 2, 3, 4, 8});
    std::vector<int64_t> eps;
    for (int64_t e = 1; e <= cp * dp; ++e)
      if ((cp * dp) % e == 0) eps.push_back(e);
    const Layout l{tp, cp, dp, pp, orders[rng() % orders.size()], pick(eps)};
    Problems invalid;
    validate_layout(l, invalid);
    if (!invalid.empty()) continue;
    const ClusterSpec& c = clusters[rng() % clusters.size()];
    const Mesh mesh(l, c.gpus_per_node);
    for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP, Dim::EDP, Dim::DCP}) {
      const std::string what = l.describe() + " on " + std::to_string(c.gpus_per_node) + " x " +
                               std::to_string(c.hosts_per_nvlink_domain) + " GPUs per domain, dim " +
                               std::to_string(int(d));
      const DimLink fast = dim_link(mesh, d, c), walked = walked_dim_link(mesh, d, c);
      expect_same(fast, walked, what);
      crossing += walked.groups_crossing_domains > 0 && walked.groups_crossing_domains < walked.groups;
      ++compared;
    }
    // The tied embedding's link: pipeline 0's first and last stage, as its rank list gives them.
    const Group pipe = mesh.group(Dim::PP, 0);
    const GroupLink listed = mesh.link_of({pipe.ranks.front(), pipe.ranks.back()}, c);
    const GroupLink embedding = mesh_links(mesh, c).embedding;
    EXPECT_EQ(embedding.nodes, listed.nodes) << l.describe();
    EXPECT_EQ(embedding.domains, listed.domains) << l.describe();
    EXPECT_EQ(int(embedding.kind), int(listed.kind)) << l.describe();
    if (HasFailure()) break;
  }
  // The sample covers many cases, partly crossing ones (some groups of a kind in, some out).
  EXPECT_GT(compared, 10000);
  EXPECT_GT(crossing, 500);
}

TEST(DimLink, nvl72_racks_at_scale_match_the_rank_walk) {
  const ClusterSpec c = cluster("gb200-nvl72", 4, 18);
  for (const std::string order : {"tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp", "tp-pp-cp-ep-dp", "tp-ep-dp-cp-pp"})
    for (int64_t pp : {1, 2, 9}) {
      const Layout l{4, 2, 144, pp, order, 16};
      const Mesh mesh(l, c.gpus_per_node);
      for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP, Dim::EDP, Dim::DCP})
        expect_same(dim_link(mesh, d, c), walked_dim_link(mesh, d, c), l.describe() + " dim " + std::to_string(int(d)));
    }
}
