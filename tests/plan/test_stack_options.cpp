// The software stack and the cost table as options: --stack presets with flags overriding them,
// --overlap lists, --attention, --tied-embeddings, fp8 refused without FP8 peaks, and the cost
// table layered from data/cost/builtin.toml, a --cost file and single [cost] keys.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/cost_table.h"
#include "core/run_spec.h"
#include "../common/test_run.h"

using namespace trident;

namespace {
OptionValues values(std::vector<std::pair<std::string, std::string>> kv) { return tests::planner_values(kv); }
}  // namespace

TEST(StackOptions, overlap_lists_parse_and_print) {
  Overlap o;
  ASSERT_TRUE(parse_overlap("tp,pp", o));
  EXPECT_TRUE(o.tp && o.pp && !o.dp);
  ASSERT_TRUE(parse_overlap("tp+dp+pp", o));
  EXPECT_EQ(to_string(o), "tp,dp,pp");
  ASSERT_TRUE(parse_overlap("none", o));
  EXPECT_EQ(to_string(o), "none");
  EXPECT_FALSE(parse_overlap("tp,ep", o));
  EXPECT_EQ(to_string(Overlap{}), "dp");  // the runtime's default
}

TEST(StackOptions, a_stack_sets_its_settings_and_explicit_flags_win) {
  Problems p;
  ExecutionSpec e = resolve_execution(values({{"stack", "megatron-core-te"}}), p);
  ASSERT_TRUE(p.empty());
  EXPECT_EQ(e.attention, AttentionKind::Flash);
  // PP sends overlap in the interleaved schedule only, as in Megatron.
  EXPECT_EQ(e.overlap, (Overlap{true, true, true, true}));
  EXPECT_TRUE(pp_overlapped(e.overlap, ScheduleKind::Interleaved));
  EXPECT_FALSE(pp_overlapped(e.overlap, ScheduleKind::OneFOneB));
  EXPECT_EQ(e.grad_bits, 16);
  EXPECT_EQ(e.zero, 1);
  EXPECT_FALSE(e.sequence_parallel);  // a layout setting (needs tp > 1): given with --sequence-parallel
  e = resolve_execution(values({{"stack", "megatron-core-te"}, {"overlap", "dp"}, {"attention", "unfused"},
                                {"grad-bits", "32"}, {"zero", "0"}}),
                        p);
  ASSERT_TRUE(p.empty());
  EXPECT_EQ(e.attention, AttentionKind::Unfused);
  EXPECT_EQ(e.overlap, (Overlap{false, true, false}));
  EXPECT_EQ(e.grad_bits, 32);
  EXPECT_EQ(e.zero, 0);
  // Without a stack: the runtime's defaults.
  e = resolve_execution(values({}), p);
  EXPECT_EQ(e.attention, AttentionKind::Unfused);
  EXPECT_EQ(e.overlap, Overlap{});
  resolve_execution(values({{"stack", "megatron-9"}, {"overlap", "ep"}, {"attention", "fast"}}), p);
  EXPECT_EQ(p.size(), 3u);
}

TEST(StackOptions, tied_embeddings_flag_changes_the_parameter_count) {
  Problems p;
  const ModelSpec untied = resolve_model(values({{"model", "gpt3-1.3b"}, {"tied-embeddings", "false"}}), p);
  const ModelSpec tied = resolve_model(values({{"model", "gpt3-1.3b"}}), p);
  ASSERT_TRUE(p.empty());
  EXPECT_EQ(count_parameters(untied).total - count_parameters(tied).total, untied.vocab * untied.hidden);
}

TEST(StackOptions, fp8_needs_a_gpu_with_fp8_peaks) {
  EXPECT_THROW(resolve_run(values({{"model", "gpt3-1.3b"}, {"cluster", "dgx-a100-80g"}, {"precision", "fp8"}}), false),
               InputError);
  const RunSpec r = resolve_run(values({{"model", "gpt3-1.3b"}, {"cluster", "dgx-h100"}, {"precision", "fp8"}}), false);
  EXPECT_EQ(r.exec.precision, Precision::FP8);
  EXPECT_EQ(r.cluster.gpu.fp8_flops, 1979e12);
}

TEST(StackOptions, cost_table_layers_builtin_gpu_file_and_keys) {
  const CostTable a100 = builtin_cost(gpu_preset("a100-80g"));
  const CostTable h100 = builtin_cost(gpu_preset("h100-80g"));
  EXPECT_EQ(a100.gpu, "a100-80g");
  EXPECT_NE(a100.gemm_peak_efficiency, h100.gemm_peak_efficiency);  // [h100-80g] overrides [default]
  EXPECT_EQ(a100.hbm_efficiency, h100.hbm_efficiency);
  const std::string path = testing::TempDir() + "trident-cost-test.toml";
  {
    std::ofstream out(path);
    out << "overlap_slowdown = 0.2\n[h100-80g]\ngemm_peak_efficiency = 0.5\n[a100-80g]\ngemm_peak_efficiency = 0.9\n";
  }
  Problems p;
  const CostTable t =
      resolve_cost(values({{"cost", path}, {"attention-efficiency", "0.33"}}), gpu_preset("h100-80g"), p);
  ASSERT_TRUE(p.empty()) << p.list().front().what;
  EXPECT_EQ(t.overlap_slowdown, 0.2);
  EXPECT_EQ(t.gemm_peak_efficiency, 0.5);  // its GPU's table, not the A100's
  EXPECT_EQ(t.attention_efficiency, 0.33);
  EXPECT_EQ(t.source, "built-in + " + path + " + [cost] keys");
  {
    std::ofstream out(path);
    out << "gemm_speed = 1\n[tpu-v9]\nx = 1\n";
  }
  resolve_cost(values({{"cost", path}, {"hbm-efficiency", "-1"}}), gpu_preset("h100-80g"), p);
  EXPECT_EQ(p.size(), 3u);  // unknown key, unknown table, negative value
  std::remove(path.c_str());
}
