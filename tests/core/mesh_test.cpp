#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/mesh.h"

using namespace trident;

namespace {

// Brute force: walk ranks 0..world-1 with nested loops, the first dimension of the order
// innermost, and record each rank's coordinates.
std::vector<Coords> brute_force_coords(const Layout& l) {
  std::array<Dim, kNumDims> dims = l.dims_fastest_first();
  std::vector<Coords> out;
  Coords c;
  for (c[dims[3]] = 0; c[dims[3]] < l.size(dims[3]); ++c[dims[3]])
    for (c[dims[2]] = 0; c[dims[2]] < l.size(dims[2]); ++c[dims[2]])
      for (c[dims[1]] = 0; c[dims[1]] < l.size(dims[1]); ++c[dims[1]])
        for (c[dims[0]] = 0; c[dims[0]] < l.size(dims[0]); ++c[dims[0]]) out.push_back(c);
  return out;
}

std::vector<Layout> many_layouts() {
  std::vector<Layout> out;
  const char* orders[] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};
  for (int64_t tp : {1, 2, 3, 4, 8})
    for (int64_t pp : {1, 2, 3, 4})
      for (int64_t dp : {1, 2, 5, 6})
        for (const char* o : orders) {
          Layout l;
          l.tp = tp;
          l.pp = pp;
          l.dp = dp;
          l.order = o;
          out.push_back(l);
        }
  return out;
}

}  // namespace

TEST(Mesh, rank_math_matches_brute_force_for_many_sizes_and_orders) {
  for (const Layout& l : many_layouts()) {
    Mesh mesh(l, 8);
    std::vector<Coords> expected = brute_force_coords(l);
    ASSERT_EQ(int64_t(expected.size()), mesh.world_size());
    for (int64_t r = 0; r < mesh.world_size(); ++r) {
      EXPECT_EQ(mesh.coords_of(r), expected[r]) << l.describe() << " rank " << r;
      EXPECT_EQ(mesh.rank_of(expected[r]), r) << l.describe();
    }
  }
}

TEST(Mesh, groups_partition_the_world_and_vary_only_their_dimension) {
  for (const Layout& l : many_layouts()) {
    Mesh mesh(l, 4);
    std::vector<Coords> coords = brute_force_coords(l);
    for (Dim kind : {Dim::TP, Dim::DP, Dim::PP}) {
      std::set<int64_t> seen;
      for (const Group& g : mesh.groups(kind)) {
        ASSERT_EQ(int64_t(g.ranks.size()), mesh.size(kind));
        for (size_t i = 0; i < g.ranks.size(); ++i) {
          const Coords& c = coords[g.ranks[i]];
          EXPECT_EQ(c[kind], int64_t(i)) << "member i has coordinate i";
          for (Dim other : {Dim::TP, Dim::DP, Dim::PP})
            if (other != kind) EXPECT_EQ(c[other], coords[g.ranks[0]][other]) << l.describe();
          EXPECT_TRUE(seen.insert(g.ranks[i]).second) << "rank in two groups of one kind";
          EXPECT_EQ(mesh.group_index_of(kind, g.ranks[i]), g.index);
        }
      }
      EXPECT_EQ(int64_t(seen.size()), mesh.world_size());
      // Groups are numbered by their lowest rank.
      auto groups = mesh.groups(kind);
      for (size_t i = 1; i < groups.size(); ++i)
        EXPECT_LT(*std::min_element(groups[i - 1].ranks.begin(), groups[i - 1].ranks.end()),
                  *std::min_element(groups[i].ranks.begin(), groups[i].ranks.end()));
    }
  }
}

TEST(Mesh, gpt3_example_places_stages_on_consecutive_nodes) {
  Layout l;
  l.tp = 8;
  l.pp = 8;
  l.dp = 64;
  l.order = "tp-pp-dp";
  Mesh mesh(l, 8);
  ClusterSpec c = cluster_preset("dgx-a100-80g");
  c.nodes = 512;
  Group tp0 = mesh.group_of(Dim::TP, 0);
  EXPECT_EQ(tp0.ranks, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(mesh.link_of(tp0.ranks, c).kind, LinkKind::NVLink);
  Group pp0 = mesh.group_of(Dim::PP, 0);
  EXPECT_EQ(pp0.ranks[1], 8);  // stage 1 of replica 0 starts at GPU 8
  GroupLink pp_link = mesh.link_of(pp0.ranks, c);
  EXPECT_EQ(pp_link.kind, LinkKind::InfiniBand);
  EXPECT_EQ(pp_link.nodes.size(), 8u);
  EXPECT_DOUBLE_EQ(pp_link.bandwidth_Bps, 25e9);
  GroupLink dp_link = mesh.link_of(mesh.group_of(Dim::DP, 0).ranks, c);
  EXPECT_EQ(dp_link.kind, LinkKind::InfiniBand);
  EXPECT_EQ(dp_link.nodes.size(), 64u);
}

TEST(Mesh, tp_spanning_nodes_runs_at_network_speed) {
  Layout l;
  l.tp = 16;
  l.dp = 2;
  Mesh mesh(l, 8);
  ClusterSpec c = cluster_preset("dgx-a100-80g");
  c.nodes = 4;
  GroupLink link = mesh.link_of(mesh.group_of(Dim::TP, 0).ranks, c);
  EXPECT_TRUE(link.crosses_nodes());
  EXPECT_EQ(link.kind, LinkKind::InfiniBand);
  EXPECT_DOUBLE_EQ(link.bandwidth_Bps, 25e9);
}

TEST(Mesh, bad_layout_is_an_input_error_with_every_problem) {
  Layout l;
  l.tp = 0;
  l.order = "tp-dp";
  try {
    Mesh mesh(l, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_GE(e.problems().size(), 2u);  // tp not positive, pp missing from order
  }
}
