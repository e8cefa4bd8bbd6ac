#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/layout_rules.h"
#include "core/mesh.h"
#include "core/run_spec.h"

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
  EXPECT_EQ(pp_link.nodes, 8);
  EXPECT_DOUBLE_EQ(pp_link.bandwidth_Bps, 25e9);
  GroupLink dp_link = mesh.link_of(mesh.group_of(Dim::DP, 0).ranks, c);
  EXPECT_EQ(dp_link.kind, LinkKind::InfiniBand);
  EXPECT_EQ(dp_link.nodes, 64);
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

namespace {
std::vector<Layout> layouts_with_cp_and_ep() {
  std::vector<Layout> out;
  const char* orders[] = {"tp-cp-ep-dp-pp", "tp-cp-dp-ep-pp", "cp-tp-ep-dp-pp", "tp-pp-ep-dp-cp", "pp-ep-dp-cp-tp",
                          "tp-ep-dp-cp-pp"};
  for (int64_t tp : {1, 2})
    for (int64_t cp : {1, 2, 4})
      for (int64_t dp : {1, 2, 3, 4})
        for (int64_t pp : {1, 2})
          for (int64_t ep : {1, 2, 4})
            for (const char* o : orders) {
              if ((cp * dp) % ep != 0) continue;
              Layout l;
              l.tp = tp;
              l.cp = cp;
              l.dp = dp;
              l.pp = pp;
              l.ep = ep;
              l.order = o;
              out.push_back(l);
            }
  return out;
}
}  // namespace

TEST(Mesh, rank_math_with_cp_matches_brute_force) {
  for (const Layout& l : layouts_with_cp_and_ep()) {
    Mesh mesh(l, 4);
    std::vector<Coords> expected = brute_force_coords(l);
    ASSERT_EQ(int64_t(expected.size()), mesh.world_size());
    for (int64_t r = 0; r < mesh.world_size(); ++r) {
      EXPECT_EQ(mesh.coords_of(r), expected[r]) << l.describe() << " rank " << r;
      EXPECT_EQ(mesh.rank_of(expected[r]), r) << l.describe();
    }
    // CP groups vary only the cp coordinate.
    for (const Group& g : mesh.groups(Dim::CP))
      for (size_t i = 0; i < g.ranks.size(); ++i) {
        Coords c = expected[g.ranks[0]];
        c[Dim::CP] = int64_t(i);
        EXPECT_EQ(mesh.rank_of(c), g.ranks[i]) << l.describe();
      }
  }
}

std::string text_of(const Problems& p) {
  std::string s;
  for (const Problem& x : p.list()) s += x.code + ": " + x.what + "; ";
  return s;
}

// Megatron-Core's rank generator, line for line (megatron/core/parallel_state.py:
// generate_masked_orthogonal_rank_groups and RankGenerator.get_ranks): the ranks of every group
// of the dimensions `token` ("ep", "tp-ep", ...) of a grid of `sizes` in `order`.
std::vector<std::vector<int64_t>> megatron_ranks(const std::map<std::string, int64_t>& sizes, std::string order,
                                                 const std::string& token) {
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
      if (i == s.size() || s[i] == '-') out.push_back(s.substr(start, i - start)), start = i + 1;
    return out;
  };
  for (const auto& [name, n] : sizes)  // RankGenerator appends a dimension the order leaves out (size 1)
    if (order.find(name) == std::string::npos) order += "-" + name;
  const std::vector<std::string> ordered = split(order), masked_tokens = split(token);
  std::vector<int64_t> parallel_size, masked_shape, unmasked_shape, masked_stride, unmasked_stride;
  int64_t world = 1;
  for (const std::string& t : ordered) parallel_size.push_back(sizes.at(t)), world *= sizes.at(t);
  int64_t stride = 1;
  for (size_t i = 0; i < ordered.size(); ++i) {
    const bool m = std::find(masked_tokens.begin(), masked_tokens.end(), ordered[i]) != masked_tokens.end();
    (m ? masked_shape : unmasked_shape).push_back(parallel_size[i]);
    (m ? masked_stride : unmasked_stride).push_back(stride);
    stride *= parallel_size[i];
  }
  auto decompose = [](int64_t index, const std::vector<int64_t>& shape) {
    std::vector<int64_t> idx;
    int64_t d = 1;
    for (int64_t s : shape) idx.push_back((index / d) % s), d *= s;
    return idx;
  };
  auto inner = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    int64_t x = 0;
    for (size_t i = 0; i < a.size(); ++i) x += a[i] * b[i];
    return x;
  };
  int64_t group_size = 1;
  for (int64_t s : masked_shape) group_size *= s;
  std::vector<std::vector<int64_t>> ranks;
  for (int64_t g = 0; g < world / group_size; ++g) {
    std::vector<int64_t> rank;
    for (int64_t r = 0; r < group_size; ++r)
      rank.push_back(inner(decompose(r, masked_shape), masked_stride) + inner(decompose(g, unmasked_shape), unmasked_stride));
    ranks.push_back(rank);
  }
  return ranks;
}

// The expert groups equal Megatron-Core's expert rank generator (RankGenerator(tp=etp, ep=ep,
// dp=edp, pp=pp, cp=1, order)) and the dense ones its decoder generator (ep=1), group for group
// and member for member, for folded (etp < tp), split (etp > 1) and Megatron-default (etp = tp)
// layouts in both of Megatron's orders (tp-cp-ep-dp-pp, and tp-cp-ep-pp-dp of
// --use-tp-pp-dp-mapping) and others; a layout Megatron asserts against is one the rules refuse.
TEST(Mesh, expert_and_dense_groups_equal_megatrons_rank_generator) {
  int compared = 0, refused = 0;
  for (const char* order : {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-cp-dp-ep-pp", "tp-ep-cp-dp-pp", "tp-pp-cp-ep-dp"})
    for (int64_t tp : {1, 2, 4})
      for (int64_t cp : {1, 2})
        for (int64_t dp : {1, 2, 4, 8})
          for (int64_t pp : {1, 2})
            for (int64_t ep : {1, 2, 4, 8})
              for (int64_t etp : {1, 2, 4}) {
                Layout l{tp, cp, dp, pp, order, ep, etp};
                if ((tp * cp * dp) % (ep * etp) != 0) continue;
                const int64_t edp = tp * cp * dp / (ep * etp);
                const std::map<std::string, int64_t> dense{{"tp", tp}, {"cp", cp}, {"dp", dp}, {"pp", pp}, {"ep", 1}};
                const std::map<std::string, int64_t> expert{{"tp", etp}, {"cp", 1}, {"dp", edp}, {"pp", pp}, {"ep", ep}};
                // Megatron's two assertions (pipeline groups shared; pp not last needs edp = dp).
                const bool megatron_accepts =
                    megatron_ranks(dense, order, "pp") == megatron_ranks(expert, order, "pp") &&
                    (std::string(order).ends_with("pp") || pp == 1 || edp == dp);
                Problems problems;
                validate_layout(l, problems);
                RunSpec moe;
                moe.layout = l;
                moe.model = model_preset("mixtral-8x7b");
                find_layout_rule("expert-grid-keeps-stages")->check(moe, problems);
                EXPECT_EQ(problems.empty(), megatron_accepts) << l.describe() << " " << text_of(problems);
                if (!megatron_accepts) {
                  ++refused;
                  continue;
                }
                const Mesh mesh(l, 8);
                auto ours = [&](Dim d) {
                  std::vector<std::vector<int64_t>> out;
                  for (const Group& g : mesh.groups(d)) out.push_back(g.ranks);
                  return out;
                };
                EXPECT_EQ(ours(Dim::ETP), megatron_ranks(expert, order, "tp")) << l.describe();
                EXPECT_EQ(ours(Dim::EP), megatron_ranks(expert, order, "ep")) << l.describe();
                EXPECT_EQ(ours(Dim::EDP), megatron_ranks(expert, order, "dp")) << l.describe();
                EXPECT_EQ(ours(Dim::TP), megatron_ranks(dense, order, "tp")) << l.describe();
                EXPECT_EQ(ours(Dim::PP), megatron_ranks(dense, order, "pp")) << l.describe();
                EXPECT_EQ(ours(Dim::DCP), megatron_ranks(dense, order, "cp-dp")) << l.describe();
                for (int64_t r = 0; r < mesh.world_size(); ++r)
                  for (Dim d : {Dim::ETP, Dim::EP, Dim::EDP}) {
                    const Group g = mesh.group_of(d, r);
                    EXPECT_EQ(g.ranks[size_t(mesh.coord_in(d, r))], r) << to_string(d) << " " << l.describe();
                  }
                ++compared;
              }
  EXPECT_GT(compared, 300);
  EXPECT_GT(refused, 10);
}

// Megatron's own layouts that the old rule (ep divides dp x cp) refused: TP2 x PP8 x EP32 on
// 256 GPUs with experts whole (etp 1), and a fold of tp 4 into ep 8 on 16 GPUs.
TEST(Mesh, megatron_layouts_with_experts_folded_over_tp_are_valid) {
  Problems p;
  validate_layout(Layout{2, 1, 16, 8, "tp-cp-ep-dp-pp", 32, 1}, p);
  EXPECT_TRUE(p.empty()) << text_of(p);
  const Mesh mesh(Layout{4, 1, 4, 1, "tp-cp-ep-dp-pp", 8, 1}, 8);
  EXPECT_EQ(mesh.group_of(Dim::EP, 0).ranks, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));  // two tp groups
  EXPECT_EQ(mesh.group_of(Dim::EDP, 0).ranks, (std::vector<int64_t>{0, 8}));
  Problems q;
  validate_layout(Layout{2, 1, 16, 8, "tp-cp-ep-dp-pp", 32, 2}, q);  // etp 2 x ep 32 = 64 > 32 ranks
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q.list()[0].code, "expert-grid-divides-ranks");
}

// For every order, folded (etp 1) and not (etp = tp): ETP, EP, EDP and DCP groups partition the
// world, stay inside one stage where the expert grid keeps the stages, one EP group meets one
// EDP group in exactly one rank, and at etp = tp with tp first in the order the expert groups
// stay inside one tp rank's data ranks (the layout before folding; cp before tp is left out of
// the expert grid, so there they do not).
TEST(Mesh, expert_groups_partition_the_world_for_every_order) {
  for (Layout l : layouts_with_cp_and_ep())
    for (int64_t etp : {int64_t(1), l.tp}) {
      l.etp = etp;
      Problems invalid;
      validate_layout(l, invalid);
      if (!invalid.empty()) continue;
      RunSpec moe;
      moe.layout = l;
      moe.model = model_preset("mixtral-8x7b");
      Problems stages;
      find_layout_rule("expert-grid-keeps-stages")->check(moe, stages);
      Mesh mesh(l, 4);
      for (Dim kind : {Dim::ETP, Dim::EP, Dim::EDP, Dim::DCP}) {
        std::set<int64_t> seen;
        for (const Group& g : mesh.groups(kind)) {
          ASSERT_EQ(int64_t(g.ranks.size()), mesh.size(kind)) << l.describe();
          const Coords c0 = mesh.coords_of(g.ranks[0]);
          for (size_t i = 0; i < g.ranks.size(); ++i) {
            const Coords c = mesh.coords_of(g.ranks[i]);
            if (kind == Dim::DCP || (kind != Dim::ETP && etp == l.tp && mesh.stride(Dim::TP) == 1)) EXPECT_EQ(c.tp(), c0.tp()) << l.describe();
            if (kind == Dim::DCP || stages.empty()) EXPECT_EQ(c.pp(), c0.pp()) << to_string(kind) << " " << l.describe();
            EXPECT_TRUE(seen.insert(g.ranks[i]).second) << to_string(kind) << " " << l.describe();
            EXPECT_EQ(mesh.group_index_of(kind, g.ranks[i]), g.index) << to_string(kind) << " " << l.describe();
            EXPECT_EQ(mesh.coord_in(kind, g.ranks[i]), int64_t(i));
          }
        }
        EXPECT_EQ(int64_t(seen.size()), mesh.world_size());
      }
      for (int64_t r = 0; r < mesh.world_size(); ++r) {
        const Group e = mesh.group_of(Dim::EP, r), d = mesh.group_of(Dim::EDP, r);
        int64_t common = 0;
        for (int64_t a : e.ranks)
          for (int64_t b : d.ranks) common += a == b;
        EXPECT_EQ(common, 1) << l.describe() << " rank " << r;
        // The dense gradient group is every rank with the same tp and pp coordinates.
        const Group dcp = mesh.group_of(Dim::DCP, r);
        EXPECT_EQ(int64_t(dcp.ranks.size()), l.cp * l.dp);
      }
    }
}

TEST(Mesh, the_expert_grid_must_divide_a_stages_ranks_and_ep_may_stand_anywhere) {
  Problems p;
  validate_layout(Layout{1, 2, 3, 1, "tp-cp-ep-dp-pp", 4}, p);  // 4 does not divide 6
  EXPECT_EQ(p.size(), 1u);
  Problems q;
  validate_layout(Layout{1, 2, 2, 1, "ep-tp-cp-dp-pp", 2}, q);  // Megatron's generator takes any order
  EXPECT_EQ(q.size(), 0u);
  Problems r;
  validate_layout(Layout{1, 2, 2, 1, "tp-dp-pp", 1}, r);  // cp 2 not in the order
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(default_order(1, 1), "tp-dp-pp");
  EXPECT_EQ(default_order(16, 1), "tp-cp-ep-dp-pp");
}

// tp 16 inside a GB200 NVL72 rack stays on NVLink; across two DGX H100 hosts it does not.
TEST(Mesh, tp_inside_an_nvl72_rack_stays_on_nvlink) {
  Layout l;
  l.tp = 16;
  l.dp = 9;
  ClusterSpec rack = cluster_preset("gb200-nvl72");
  rack.nodes = 36;  // two racks
  Mesh mesh(l, rack.gpus_per_node);
  GroupLink link = mesh.link_of(mesh.group_of(Dim::TP, 0).ranks, rack);
  EXPECT_EQ(link.nodes, 4);  // four trays of 4 GPUs
  EXPECT_EQ(link.domains, 1);
  EXPECT_EQ(link.kind, LinkKind::NVLink);
  EXPECT_DOUBLE_EQ(link.bandwidth_Bps, 900e9);
  // The DP group runs over both racks: ranks 0, 16, ..., 128 span domains 0 and 1.
  GroupLink dp = mesh.link_of(mesh.group_of(Dim::DP, 0).ranks, rack);
  EXPECT_EQ(dp.domains, 2);  // domains 0 and 1
  EXPECT_EQ(dp.kind, LinkKind::InfiniBand);
  EXPECT_DOUBLE_EQ(dp.bandwidth_Bps, 50e9);
  ClusterSpec dgx = cluster_preset("dgx-h100");
  dgx.nodes = 18;
  Mesh hosts(l, dgx.gpus_per_node);
  GroupLink across = hosts.link_of(hosts.group_of(Dim::TP, 0).ranks, dgx);
  EXPECT_TRUE(across.crosses_domains());
  EXPECT_EQ(across.kind, LinkKind::InfiniBand);
}

TEST(Mesh, group_stride_describes_every_group_when_there_is_one) {
  for (const Layout& l : layouts_with_cp_and_ep()) {
    Mesh mesh(l, 4);
    for (Dim kind : {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP, Dim::EDP, Dim::DCP}) {
      const int64_t s = mesh.group_stride(kind);
      if (s == 0) continue;
      for (const Group& g : mesh.groups(kind))
        for (size_t i = 0; i < g.ranks.size(); ++i)
          EXPECT_EQ(g.ranks[i], g.ranks[0] + int64_t(i) * s) << to_string(kind) << " " << l.describe();
    }
  }
}

// The counting links agree with the node list: a progression counted without listing its ranks,
// and a group listed out of order, touch the nodes and NVLink domains nodes_of finds.
TEST(Mesh, link_counts_match_the_node_list) {
  Layout l;
  l.tp = 4, l.dp = 36, l.order = "tp-dp-pp";
  ClusterSpec rack = cluster_preset("gb200-nvl72");
  rack.nodes = 36;
  const Mesh mesh(l, rack.gpus_per_node);
  const int64_t hpd = rack.hosts_per_nvlink_domain;
  for (int64_t first : {0, 1, 5, 70})
    for (int64_t stride : {1, 3, 4, 7, 16, 72})
      for (int64_t n : {1, 2, 5, 9}) {
        if (first + (n - 1) * stride >= mesh.world_size()) continue;
        std::vector<int64_t> ranks;
        for (int64_t j = 0; j < n; ++j) ranks.push_back(first + j * stride);
        const std::vector<int64_t> nodes = mesh.nodes_of(ranks);
        std::vector<int64_t> domains;
        for (int64_t x : nodes)
          if (domains.empty() || domains.back() != x / hpd) domains.push_back(x / hpd);
        const GroupLink p = mesh.link_of_progression(first, stride, n, rack);
        std::reverse(ranks.begin(), ranks.end());  // out of order: counted over the sorted nodes
        const GroupLink r = mesh.link_of(ranks, rack);
        for (const GroupLink* g : {&p, &r}) {
          EXPECT_EQ(g->nodes, int64_t(nodes.size())) << first << " " << stride << " " << n;
          EXPECT_EQ(g->domains, int64_t(domains.size())) << first << " " << stride << " " << n;
          EXPECT_EQ(g->kind, domains.size() > 1 ? rack.inter.kind : rack.intra.kind);
        }
      }
}

// An ETP, EP, EDP or DCP group's link counted from its pattern equals its rank list's, on
// groups large enough that one repeat is counted and multiplied (dp up to 384, cp fast or slow).
TEST(Mesh, a_derived_groups_link_counted_by_its_repeats_matches_its_rank_list) {
  int counted = 0;
  for (const std::string order : {"tp-cp-pp-ep-dp", "tp-pp-cp-ep-dp", "tp-cp-ep-dp-pp", "tp-ep-dp-cp-pp"})
    for (int64_t cp : {2, 3, 4})
      for (int64_t dp : {48, 96, 384})
        for (int64_t ep : {1, 2, 4, 8}) {
          for (int64_t gpn : {4, 8}) {
            Layout l{2, cp, dp, 3, order, ep, ep == 2 ? 2 : 1};
            Problems invalid;
            validate_layout(l, invalid);
            if (!invalid.empty()) continue;
            ClusterSpec c = cluster_preset("dgx-h100");
            c.gpus_per_node = gpn;
            c.hosts_per_nvlink_domain = gpn == 4 ? 2 : 1;
            const Mesh mesh(l, c.gpus_per_node);
            for (Dim kind : {Dim::ETP, Dim::EP, Dim::EDP, Dim::DCP}) {
              if (mesh.size(kind) <= 1) continue;
              for (int64_t index : {int64_t(0), int64_t(1), mesh.group_count(kind) / 2, mesh.group_count(kind) - 1}) {
                const GroupLink listed = mesh.link_of(mesh.group(kind, index).ranks, c);
                const GroupLink counted_link = mesh.link_of_group(kind, index, c);
                EXPECT_EQ(counted_link.nodes, listed.nodes) << l.describe() << " " << to_string(kind) << " " << index;
                EXPECT_EQ(counted_link.domains, listed.domains) << l.describe() << " " << to_string(kind);
                EXPECT_EQ(int(counted_link.kind), int(listed.kind)) << l.describe() << " " << to_string(kind);
                ++counted;
              }
            }
          }
        }
  EXPECT_GT(counted, 500);
}
