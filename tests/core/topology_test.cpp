#include <gtest/gtest.h>

#include "core/run_spec.h"
#include "core/topology.h"
#include "report/topology_report.h"

using namespace trident;

namespace {
RunSpec gpt3_example() {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  for (auto [k, val] : std::vector<std::pair<std::string, std::string>>{
           {"model", "gpt3-175b"}, {"cluster", "dgx-a100-80g"}, {"nodes", "512"}, {"tp", "8"}, {"pp", "8"},
           {"dp", "64"}, {"order", "tp-pp-dp"}})
    v.set(k, val, "--" + k);
  return resolve_run(v, false);
}
}  // namespace

TEST(Topology, gpt3_example_keeps_tp_on_nvlink_and_pp_dp_on_infiniband) {
  RunSpec r = gpt3_example();
  Mesh mesh(r.layout, r.cluster.gpus_per_node);
  TopologyTable t = build_topology(mesh, r.cluster, false, r.model.is_moe());
  ASSERT_EQ(t.world, 4096);
  ASSERT_EQ(t.rows.size(), 3u);  // one link class per kind
  EXPECT_EQ(t.rows[0].kind, Dim::TP);
  EXPECT_EQ(t.rows[0].link, LinkKind::NVLink);
  EXPECT_EQ(t.rows[0].groups, 512);
  EXPECT_EQ(t.rows[0].max_nodes, 1);
  EXPECT_EQ(t.rows[1].kind, Dim::PP);
  EXPECT_EQ(t.rows[1].link, LinkKind::InfiniBand);
  EXPECT_EQ(t.rows[1].min_nodes, 8);
  EXPECT_EQ(t.rows[2].kind, Dim::DP);
  EXPECT_EQ(t.rows[2].link, LinkKind::InfiniBand);
  EXPECT_EQ(t.rows[2].groups, 64);
  std::string text = topology_text(r, mesh, t);
  EXPECT_NE(text.find("stage 0: GPUs 0-7 on node 0, TP all-reduce over NVLink"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 1: GPUs 8-15 on node 1"), std::string::npos) << text;
}

TEST(Topology, json_with_all_lists_every_group) {
  RunSpec r = gpt3_example();
  Mesh mesh(r.layout, r.cluster.gpus_per_node);
  nlohmann::json j = topology_json(r, build_topology(mesh, r.cluster, true, r.model.is_moe()));
  EXPECT_EQ(j["world"], 4096);
  EXPECT_EQ(j["groups"].size(), 512u + 512u + 64u);
  const auto& g = j["groups"][0];
  EXPECT_EQ(g["kind"], "tp");
  EXPECT_EQ(g["ranks"], nlohmann::json({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(g["link"], "NVLink");
  EXPECT_DOUBLE_EQ(g["bandwidth_gbps"].get<double>(), 300.0);
}

TEST(Topology, format_ranks_is_exact) {
  EXPECT_EQ(format_ranks({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(format_ranks({0, 8, 16, 24, 32}), "0,8,...,32 (step 8)");
  EXPECT_EQ(format_ranks({0, 3, 5}), "0,3,5");
}
