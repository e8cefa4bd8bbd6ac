// Replan for the survivors (plan/survivor_replan.h): node lists, counts, batch policies.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cluster_spec.h"
#include "plan/survivor_replan.h"

using namespace trident;
using namespace trident::plan;

namespace {

ClusterSpec h100(int64_t nodes) {
  ClusterSpec c = cluster_preset("dgx-h100");
  c.nodes = nodes;
  return c;
}

RunSpec llama8b_on(int64_t nodes, int64_t batch) {
  RunSpec r;
  r.model = model_preset("llama3-8b");
  r.cluster = h100(nodes);
  r.layout.tp = 1, r.layout.pp = 1, r.layout.dp = nodes * 8;
  r.exec.global_batch_size = batch;
  r.exec.micro_batch_size = 1;
  r.exec.zero = 1;
  return r;
}

}  // namespace

TEST(SurvivorReplan, slurm_hostlists_expand_with_their_padding) {
  Problems p;
  EXPECT_EQ(expand_slurm_nodelist("node[001-004,007]", p),
            (std::vector<std::string>{"node001", "node002", "node003", "node004", "node007"}));
  EXPECT_EQ(expand_slurm_nodelist("gpu5,rack[1-2]a,x[9-11]", p),
            (std::vector<std::string>{"gpu5", "rack1a", "rack2a", "x9", "x10", "x11"}));
  EXPECT_TRUE(p.empty());
  for (const char* bad : {"node[5-3]", "node[1-2", "node[a-b]", "no de", "node[1--2]"}) {
    Problems q;
    EXPECT_TRUE(expand_slurm_nodelist(bad, q).empty()) << bad;
    EXPECT_FALSE(q.empty()) << bad;
  }
}

TEST(SurvivorReplan, survivors_are_whole_nodes) {
  Problems p;
  const Survivors g = survivors_from_gpus(450, h100(64), p);
  EXPECT_EQ(g.nodes, 56);  // 450 / 8 = 56 whole nodes
  EXPECT_EQ(g.gpus, 448);
  EXPECT_EQ(g.idle_gpus, 2);
  EXPECT_EQ(survivors_from_lost_nodes({"node003", "node017"}, h100(64), p).nodes, 62);
  EXPECT_EQ(survivors_from_nodelist(expand_slurm_nodelist("node[001-056]", p), h100(64), p).nodes, 56);
  EXPECT_TRUE(p.empty());
  Problems q;
  survivors_from_lost_nodes({"a", "a"}, h100(64), q);  // a node twice
  survivors_from_gpus(512, h100(64), q);                // nothing lost
  survivors_from_gpus(7, h100(64), q);                  // less than a node
  survivors_from_lost_nodes(std::vector<std::string>(64, "x"), h100(64), q);
  EXPECT_EQ(q.list().size(), 4u);
}

TEST(SurvivorReplan, keep_holds_the_batch_and_the_learning_rate) {
  const RunSpec run = llama8b_on(4, 256);
  Problems p;
  const Survivors s = survivors_from_lost_nodes({"n1"}, run.cluster, p);
  const SurvivorPlan r = replan_for_survivors(run, s, BatchPolicy::Keep, LrRule::Linear, cost_table(run), 3.0 * (1 << 30), 1);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.batch_after, 256);
  EXPECT_EQ(r.best->run.exec.global_batch_size, 256);
  EXPECT_EQ(r.lr_factor, 1);
  EXPECT_LE(r.nodes_used, 3);
  EXPECT_EQ(r.best->run.layout.world_size(), r.nodes_used * 8);
  EXPECT_NEAR(r.step_ratio, r.best->time.step / r.original.time.step, 1e-12);
  EXPECT_NEAR(r.throughput_ratio * r.time_to_train_ratio, 1, 1e-12);
  EXPECT_GT(r.step_ratio, 1);  // fewer GPUs, the same batch: slower steps
  // The fastest count of nodes: each count tried gives no faster layout than the one kept.
  for (int64_t nodes = 1; nodes <= 3; ++nodes) {
    ClusterSpec c = run.cluster;
    c.nodes = nodes;
    SearchSpace space;
    space.use_stack(run.exec);
    const SearchResult one = search(run.model, c, 256, space, 1, 3.0 * (1 << 30), cost_table(run));
    if (!one.best.empty()) EXPECT_LE(one.best.front().tokens_per_s, r.best->tokens_per_s + 1e-6) << nodes;
  }
}

TEST(SurvivorReplan, scale_shrinks_the_batch_and_names_the_rule) {
  const RunSpec run = llama8b_on(4, 256);
  Problems p;
  const Survivors s = survivors_from_lost_nodes({"n1"}, run.cluster, p);
  for (LrRule rule : {LrRule::Linear, LrRule::Sqrt}) {
    const SurvivorPlan r = replan_for_survivors(run, s, BatchPolicy::Scale, rule, cost_table(run), 3.0 * (1 << 30), 1);
    ASSERT_TRUE(r.best);
    EXPECT_LE(r.batch_after, 256 * r.nodes_used / 4);  // floor(B x nodes used / nodes), or lowered to fit
    EXPECT_EQ(r.best->run.exec.global_batch_size, r.batch_after);
    const double ratio = double(r.batch_after) / 256;
    EXPECT_NEAR(r.lr_factor, rule == LrRule::Linear ? ratio : std::sqrt(ratio), 1e-12);
  }
}
