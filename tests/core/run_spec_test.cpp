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

TEST(RunSpec, cp_takes_megatron_default_order_and_shares_the_world) {
  RunSpec r = resolve_run(with({{"model", "llama3-405b"}, {"seq-len", "131072"}, {"cluster", "dgx-h100"},
                                {"nodes", "2048"}, {"tp", "8"}, {"cp", "16"}, {"pp", "16"}}),
                          false);
  EXPECT_EQ(r.layout.order, "tp-cp-ep-dp-pp");
  EXPECT_EQ(r.layout.dp, 8);  // 16384 / (8 x 16 x 16)
  // Without cp or ep the default stays tp-dp-pp.
  EXPECT_EQ(resolve_run(with({{"model", "gpt3-175b"}, {"nodes", "8"}, {"tp", "8"}}), false).layout.order, "tp-dp-pp");
}

TEST(RunSpec, cp_needs_the_sequence_divisible_by_twice_cp) {
  auto ps = problems_of(with({{"model", "llama3-8b"}, {"seq-len", "8196"}, {"nodes", "2"}, {"cp", "4"}}), false);
  EXPECT_TRUE(has_code(ps, "cp-divides-sequence"));
  EXPECT_TRUE(problems_of(with({{"model", "llama3-8b"}, {"nodes", "2"}, {"cp", "4"}}), false).empty());
}

TEST(RunSpec, ep_must_divide_the_experts_and_needs_a_moe_model) {
  auto ps = problems_of(with({{"model", "mixtral-8x7b"}, {"cluster", "dgx-h100"}, {"nodes", "3"}, {"ep", "3"}}), false);
  EXPECT_TRUE(has_code(ps, "ep-divides-experts"));
  EXPECT_TRUE(has_code(problems_of(with({{"model", "llama3-8b"}, {"nodes", "1"}, {"ep", "2"}}), false),
                       "ep-needs-experts"));
  RunSpec r = resolve_run(with({{"model", "mixtral-8x7b"}, {"cluster", "dgx-h100"}, {"nodes", "2"}, {"ep", "8"},
                                {"capacity-factor", "1.25"}}),
                          false);
  EXPECT_EQ(r.layout.ep, 8);
  EXPECT_DOUBLE_EQ(r.model.capacity_factor, 1.25);
  EXPECT_EQ(r.model.name, "mixtral-8x7b (modified)");
}

TEST(RunSpec, custom_moe_model_takes_its_sizes_from_flags) {
  RunSpec r = resolve_run(with({{"layers", "4"}, {"hidden", "256"}, {"heads", "4"}, {"family", "llama"},
                                {"ffn-hidden", "512"}, {"experts", "16"}, {"experts-per-token", "4"},
                                {"expert-ffn-hidden", "128"}, {"shared-experts", "1"}}),
                          false);
  EXPECT_EQ(r.model.experts, 16);
  EXPECT_EQ(r.model.expert_ffn_hidden, 128);
  const ParamCount c = count_parameters(r.model);
  EXPECT_EQ(c.expert_params, 3 * 256 * 128);
  EXPECT_EQ(c.active, c.total - 4 * 12 * c.expert_params);
}

TEST(RunSpec, the_default_stack_is_megatron_core_te_on_gpus_and_the_runtimes_on_cpus) {
  EXPECT_EQ(default_stack(cluster_preset("dgx-h100")), "megatron-core-te");
  ClusterSpec cpu = cluster_preset("dgx-h100");
  cpu.gpu.bf16_flops = cpu.gpu.fp32_flops;  // what trident bench writes: no 16-bit tensor-core peak
  EXPECT_EQ(default_stack(cpu), "");
  EXPECT_EQ(resolve_run(with({{"model", "gpt3-1.3b"}, {"cluster", "dgx-h100"}}), false).exec.stack, "megatron-core-te");
  EXPECT_EQ(resolve_run(with({{"model", "gpt3-1.3b"}, {"cluster", "dgx-h100"}, {"stack", "trident"}}), false).exec.attention,
            AttentionKind::Unfused);
}
