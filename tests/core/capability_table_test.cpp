// The capability table's columns agree row by row: the runtime's own run passes every train
// cell; each row's example value is refused or substituted by some target; the rehearsal's
// substitution leaves nothing its train cell refuses on CPU ranks (so a rehearsed recipe is one
// `trident train` runs); each column's refusals carry its own code prefix.
#include <gtest/gtest.h>

#include <string>

#include "capability/capability.h"
#include "capability/capability_table.h"
#include "capability/rehearsal_check.h"
#include "core/problems.h"
#include "../common/test_run.h"

namespace trident::capability {
namespace {

// A run as `trident train` runs it by default: a small Llama, fp32, unfused attention.
RunSpec runtime_run() {
  ModelSpec m = model_preset("llama3-8b");
  m.layers = 4, m.hidden = 64, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 128, m.vocab = 256, m.seq_len = 32;
  RunSpec r = tests::run_on(m, "dgx-h100", 1, 1, 1, 1, "tp-cp-ep-dp-pp");
  r.exec.precision = Precision::FP32;
  r.exec.global_batch_size = 4;
  return r;
}

Problems train_cell(const CapabilityRow& row, const RunSpec& r, const std::string& device) {
  Problems p;
  if (row.train) row.train(r, device, p);
  return p;
}

bool codes_start_with(const Problems& p, const std::string& prefix) {
  for (const Problem& q : p.list())
    if (q.code.rfind(prefix, 0) != 0) return false;
  return true;
}

TEST(CapabilityTable, the_runtimes_own_run_passes_every_train_cell) {
  const RunSpec r = runtime_run();
  for (const char* device : {"cpu", "cuda"})
    for (const CapabilityRow& row : capability_rows())
      EXPECT_TRUE(train_cell(row, r, device).empty()) << row.setting << " on " << device << ": "
                                                      << train_cell(row, r, device).list()[0].what;
  RunSpec copy = r;
  EXPECT_TRUE(substitute_for_rehearsal(copy).empty());
}

TEST(CapabilityTable, each_rows_example_is_refused_or_substituted_and_the_rehearsal_runs_what_train_runs) {
  int substituted = 0, refused_by_frameworks = 0;
  for (const CapabilityRow& row : capability_rows()) {
    ASSERT_NE(row.example, nullptr) << row.setting;
    RunSpec r = runtime_run();
    row.example(r);
    Problems train_cpu = train_cell(row, r, "cpu"), train_cuda = train_cell(row, r, "cuda"), megatron, torchtitan;
    if (row.megatron) row.megatron(r, megatron);
    if (row.torchtitan) row.torchtitan(r, true, torchtitan);
    RunSpec rehearsed = r;
    const std::string line = row.rehearse ? row.rehearse(rehearsed) : "";
    EXPECT_TRUE(!train_cpu.empty() || !train_cuda.empty() || !megatron.empty() || !torchtitan.empty() || !line.empty())
        << row.setting << ": its example value is neither refused nor substituted by any target";
    // Each column names its target in its codes.
    EXPECT_TRUE(codes_start_with(megatron, "megatron-")) << row.setting;
    EXPECT_TRUE(codes_start_with(torchtitan, "torchtitan-")) << row.setting;
    if (!line.empty()) {
      ++substituted;
      // A row without a train cell is one the runtime runs its own way (and predicts so).
      if (row.train) EXPECT_FALSE(train_cpu.empty()) << row.setting << ": substituted (" << line << ") but train runs it";
      EXPECT_TRUE(train_cell(row, rehearsed, "cpu").empty())
          << row.setting << ": after '" << line << "' train on CPU ranks still refuses: "
          << train_cell(row, rehearsed, "cpu").list()[0].what;
      RunSpec again = rehearsed;
      EXPECT_EQ(row.rehearse(again), "") << row.setting << ": substituted twice";
    }
    refused_by_frameworks += !megatron.empty() || !torchtitan.empty();
  }
  EXPECT_GE(substituted, 10);
  EXPECT_GE(refused_by_frameworks, 8);  // 9 rows of 14 have a framework refusal at their example
}

// The rehearsal check and train's run check read the same rows: a recipe with every
// substitutable setting at a value CPU ranks cannot run comes out rehearsable, each named.
TEST(CapabilityTable, rehearsal_check_substitutes_from_the_table_and_trains_the_result) {
  RunSpec r = runtime_run();
  r.layout.tp = 2, r.layout.pp = 2, r.exec.global_batch_size = 4;
  r.exec.precision = Precision::BF16;
  r.exec.attention = AttentionKind::Flash;
  r.exec.grad_bits = 16;
  r.exec.recipe.cuda_graphs = CudaGraphs::TransformerEngine;
  r.exec.recipe.dp_after_pipeline_flush = true;
  Problems train;
  check_executable(r, "cpu", {}, train);
  EXPECT_GE(train.size(), 5u);
  const RehearsalCheck c = rehearsal_check(r);
  EXPECT_TRUE(c.rehearsable()) << c.refusals[0].what;
  EXPECT_GE(c.substitutions.size(), 5u);
  Problems after;
  check_executable(c.run, "cpu", {}, after);
  EXPECT_TRUE(after.empty()) << after.list()[0].what;
}

}  // namespace
}  // namespace trident::capability
