#include <gtest/gtest.h>

#include "core/run_spec.h"

using namespace trident;

namespace {
OptionValues with(std::vector<std::pair<std::string, std::string>> kv) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  for (auto& [k, val] : kv) v.set(k, val, "--" + k);
  return v;
}

std::vector<Problem> problems_of(const OptionValues& v, bool check_batch = true) {
  try {
    resolve_run(v, check_batch);
  } catch (const InputError& e) {
    return e.problems();
  }
  return {};
}

bool has_code(const std::vector<Problem>& ps, const std::string& code) {
  for (auto& p : ps)
    if (p.code == code) return true;
  return false;
}
}  // namespace

TEST(RunSpec, gpt3_example_resolves_to_4096_gpus) {
  RunSpec r = resolve_run(with({{"model", "gpt3-175b"}, {"cluster", "dgx-a100-80g"}, {"nodes", "512"}, {"tp", "8"},
                                {"pp", "8"}, {"dp", "64"}, {"order", "tp-pp-dp"}}),
                          false);
  EXPECT_EQ(r.cluster.world_size(), 4096);
  EXPECT_EQ(r.layout.world_size(), 4096);
}

TEST(RunSpec, dp_defaults_to_the_rest_of_the_world) {
  RunSpec r = resolve_run(with({{"model", "gpt3-175b"}, {"nodes", "16"}, {"tp", "8"}, {"pp", "4"}}), false);
  EXPECT_EQ(r.layout.dp, 4);
}

TEST(RunSpec, nodes_follow_the_layout_when_not_given) {
  RunSpec r = resolve_run(with({{"model", "gpt3-175b"}, {"tp", "8"}, {"pp", "8"}, {"dp", "64"}}), false);
  EXPECT_EQ(r.cluster.nodes, 512);
}

TEST(RunSpec, layout_product_must_equal_world_size) {
  auto ps = problems_of(with({{"model", "gpt3-175b"}, {"nodes", "512"}, {"tp", "8"}, {"pp", "8"}, {"dp", "32"}}));
  ASSERT_TRUE(has_code(ps, "world-size"));
  EXPECT_NE(ps[0].fix.find("--dp 64"), std::string::npos) << ps[0].fix;
}

TEST(RunSpec, tp_must_divide_heads) {
  auto ps = problems_of(with({{"model", "gpt2-small"}, {"tp", "8"}, {"dp", "1"}}));
  ASSERT_TRUE(has_code(ps, "tp-divides-heads"));
}

TEST(RunSpec, all_problems_of_one_command_come_together) {
  auto ps = problems_of(with({{"model", "gpt2-small"},
                              {"cluster", "dgx-a100-80g"},
                              {"nodes", "1"},
                              {"tp", "5"},
                              {"pp", "1"},
                              {"dp", "3"},
                              {"order", "tp-dp"},
                              {"schedule", "zigzag"},
                              {"global-batch-size", "7"},
                              {"micro-batch-size", "2"}}));
  EXPECT_TRUE(has_code(ps, "world-size"));
  EXPECT_TRUE(has_code(ps, "tp-divides-heads"));
  EXPECT_TRUE(has_code(ps, "batch-divisibility"));
  bool order = false, schedule = false;
  for (auto& p : ps) {
    order = order || p.what.find("missing 'pp'") != std::string::npos;
    schedule = schedule || p.what.find("zigzag") != std::string::npos;
  }
  EXPECT_TRUE(order);
  EXPECT_TRUE(schedule);
}

TEST(RunSpec, micro_batch_larger_than_global_batch_is_rejected) {
  auto ps = problems_of(with({{"model", "gpt2-small"}, {"global-batch-size", "2"}, {"micro-batch-size", "4"}}));
  ASSERT_TRUE(has_code(ps, "batch-divisibility"));
}

TEST(RunSpec, unknown_presets_are_both_reported) {
  auto ps = problems_of(with({{"model", "gpt-9"}, {"cluster", "tpu-pod"}}));
  EXPECT_EQ(ps.size(), 2u);
}

TEST(RunSpec, custom_model_needs_its_sizes_and_overrides_apply) {
  RunSpec r = resolve_run(with({{"layers", "4"}, {"hidden", "256"}, {"heads", "4"}, {"vocab", "512"}, {"seq-len", "128"}}), false);
  EXPECT_EQ(r.model.ffn_hidden, 1024);
  EXPECT_EQ(r.model.kv_heads, 4);
  auto ps = problems_of(with({{"hidden", "256"}}), false);
  EXPECT_EQ(ps.size(), 2u);  // no --layers, no --heads
}

TEST(RunSpec, virtual_stages_need_the_interleaved_schedule) {
  auto ps = problems_of(with({{"model", "gpt2-small"}, {"virtual-stages", "2"}}), false);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_NE(ps[0].fix.find("interleaved"), std::string::npos);
}
