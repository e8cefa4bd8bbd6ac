// Integer arithmetic of sizes: products of options that each pass their range check are
// computed in the one checked helper (core/checked_size.h), so they are refused with the terms
// named instead of wrapping to negative counts or looping over billions of ranks.
#include <gtest/gtest.h>

#include <string>

#include "core/checked_size.h"
#include "core/model_spec.h"
#include "core/options.h"
#include "core/run_spec.h"
#include "runtime/parallel/stage_split.h"

using namespace trident;

namespace {

OptionValues options(std::initializer_list<std::pair<const char*, const char*>> flags) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  for (const auto& [name, value] : flags) v.set(name, value, std::string("--") + name);
  return v;
}

// The problems resolve_run reports, joined; empty when the run resolves.
std::string refusal(std::initializer_list<std::pair<const char*, const char*>> flags) {
  try {
    resolve_run(options(flags), true);
  } catch (const InputError& e) {
    std::string all;
    for (const auto& p : e.problems()) all += p.what + " | " + p.fix + "\n";
    return all;
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CheckedSize, products_beyond_the_limit_name_every_term) {
  Problems p;
  EXPECT_EQ(*checked_product("GPUs", {{"tp", 8}, {"pp", 8}}, kMaxGpus, "fix", p), 64);
  EXPECT_TRUE(p.empty());
  // 2^31-1 four times is 2^124: a plain int64 product wraps (to 1 here, which looks valid).
  const int64_t big = 2147483647;
  EXPECT_FALSE(checked_product("GPUs", {{"tp", big}, {"cp", big}, {"pp", big}, {"dp", big}}, kMaxGpus, "fix", p));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(has(p.list()[0].what, "tp 2147483647 x cp 2147483647 x pp 2147483647 x dp 2147483647"))
      << p.list()[0].what;
  EXPECT_TRUE(has(p.list()[0].what, "2.13e+37")) << p.list()[0].what;
  EXPECT_FALSE(checked_product("x", {{"a", -3}, {"b", 2}}, kMaxCount, "fix", p));
  EXPECT_TRUE(has(p.list()[1].what, "negative")) << p.list()[1].what;
  EXPECT_FALSE(checked_int("--top", int64_t(1) << 31, p));
  EXPECT_EQ(*checked_int("--top", 5, p), 5);
  EXPECT_EQ(p.size(), 3u);
}

TEST(CheckedSize, counts_remember_an_overflow_instead_of_wrapping) {
  const CheckedCount big = int64_t(1) << 40;
  EXPECT_EQ((big * 1000).value("x"), int64_t(1000) << 40);
  EXPECT_FALSE((big * big).ok());
  EXPECT_FALSE((big * big - big * big).ok());  // sticky: the wrapped difference would look like 0
  EXPECT_THROW((big * big).value("the parameter count"), InputError);
}

TEST(SizeArithmetic, a_parameter_count_beyond_64_bits_is_refused_not_negative) {
  // Every size within its option's range, the product (experts x h x ffn x layers) is not.
  ModelSpec m = model_preset("llama3-405b");
  m.layers = 4096;
  m.hidden = 1 << 22;
  m.heads = 1 << 16;
  m.kv_heads = 1 << 16;
  m.experts = 1 << 16;
  m.experts_per_token = 2;
  m.expert_ffn_hidden = 1 << 22;
  EXPECT_THROW(count_parameters(m), InputError);
  Problems p;
  validate_model(m, p);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(has(p.list()[0].what, "parameter count")) << p.list()[0].what;
  EXPECT_TRUE(has(p.list()[0].what, "4096 layers")) << p.list()[0].what;
  // A real model keeps its exact count: 96 (12h^2 + 13h) + (V + s + 2) h with h 12288, V 50257, s 2048.
  EXPECT_EQ(count_parameters(model_preset("gpt3-175b")).total, 174604259328);
}

TEST(SizeArithmetic, clusters_and_layouts_beyond_a_million_gpus_are_refused_up_front) {
  const std::string cluster = refusal({{"model", "gpt3-175b"}, {"nodes", "100000"}, {"gpus-per-node", "100000"},
                                       {"global-batch-size", "1536"}});
  EXPECT_TRUE(has(cluster, "nodes 100000 x gpus-per-node 100000 = 1e+10")) << cluster;
  EXPECT_TRUE(has(cluster, "1048576")) << cluster;
  // A layout whose product wraps: before, the world size check compared wrapped numbers.
  const std::string layout = refusal({{"model", "gpt3-175b"}, {"tp", "2147483647"}, {"pp", "2147483647"},
                                      {"dp", "2147483647"}, {"global-batch-size", "1536"}});
  EXPECT_TRUE(has(layout, "tp 2147483647 x pp 2147483647 x dp 2147483647 x cp 1")) << layout;
  // A layout that fits int64 but not any machine (17 billion nodes would be sized for it).
  const std::string wide = refusal({{"model", "gpt3-175b"}, {"tp", "8"}, {"pp", "8"}, {"dp", "2147483647"},
                                    {"global-batch-size", "1536"}});
  EXPECT_TRUE(has(wide, "1.37e+11")) << wide;
  EXPECT_EQ(refusal({{"model", "gpt3-175b"}, {"tp", "8"}, {"pp", "8"}, {"dp", "64"}, {"global-batch-size", "1536"}}),
            "");
}

TEST(SizeArithmetic, model_and_batch_sizes_have_bounds_a_plan_can_finish_in) {
  // Each is within int, but a simulation of 2^31 layers or a step of 2^31 micro-batches never ends.
  Problems p;
  EXPECT_FALSE(options({{"layers", "2147483647"}}).get_int("layers", p));
  EXPECT_FALSE(options({{"global-batch-size", "2147483647"}}).get_int("global-batch-size", p));
  EXPECT_EQ(p.size(), 2u);
  const std::string scores = refusal({{"model", "gpt3-125m"}, {"seq-len", "16777216"}, {"heads", "65536"},
                                      {"hidden", "65536"}, {"global-batch-size", "8"}, {"tp", "1"}, {"pp", "1"},
                                      {"dp", "8"}});
  EXPECT_TRUE(has(scores, "attention scores of one layer")) << scores;
  const std::string blocks = refusal({{"model", "gpt3-125m"}, {"global-batch-size", "1048576"}, {"tp", "1"},
                                      {"pp", "8"}, {"dp", "1"}, {"virtual-stages", "1"}});
  EXPECT_TRUE(has(blocks, "pipeline blocks of one step: micro-batches 1048576 x pp 8")) << blocks;
}

TEST(SizeArithmetic, a_batch_below_one_micro_batch_per_replica_suggests_a_batch_above_zero) {
  const std::string fix = refusal({{"model", "gpt3-175b"}, {"tp", "8"}, {"pp", "8"}, {"dp", "64"},
                                   {"global-batch-size", "16"}});
  EXPECT_TRUE(has(fix, "--global-batch-size 64 (or more)")) << fix;
  EXPECT_FALSE(has(fix, "--global-batch-size 0")) << fix;
}

// An explicit pipeline split of counts near 2^62: four of them sum, around 64 bits, to the
// model's 4 layers. The check sums them checked and bounds each by the model's layers.
TEST(SizeArithmetic, a_stage_split_that_wraps_around_64_bits_is_refused) {
  ModelSpec m = model_preset("gpt2-small");
  m.layers = 4;
  const int64_t q = int64_t(1) << 62;
  for (const std::vector<int64_t>& split :
       {std::vector<int64_t>{q, q, q, q + 4}, std::vector<int64_t>{q, -q + 4, 0, 0}, std::vector<int64_t>{5, -1}}) {
    Problems p;
    parallel::make_stage_split(m, int64_t(split.size()), 1, split, p);
    ASSERT_EQ(p.size(), 1u) << split[0];
    EXPECT_EQ(p.list()[0].code, "stage-split");
    EXPECT_TRUE(has(p.list()[0].fix, "counts of 1 to 4 adding up to 4")) << p.list()[0].fix;
  }
  Problems p;
  const auto ok = parallel::make_stage_split(m, 2, 1, {1, 3}, p);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(ok.layers_of, (std::vector<int64_t>{1, 3}));
}
