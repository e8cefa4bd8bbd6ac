// The recipe settings against hand computations: FP8 primary weights (--fp8-params), 16-bit
// optimizer states, context parallel by all-gather (--cp-kind allgather) and the per-chunk DP
// overlap of the interleaved schedule; their flags, and the presets that set them.
#include <gtest/gtest.h>

#include "core/run_spec.h"
#include "core/units.h"
#include "plan/context_parallel.h"
#include "plan/dp_overlap.h"
#include "plan/estimate.h"
#include "../common/test_run.h"

using namespace trident;
using namespace trident::plan;

namespace {

// A Llama 8B-like model on 4 nodes of DGX H100, tp 4 x pp 2 x dp 4, ZeRO 1: every DP term shows.
RunSpec llama_run(Precision precision) {
  RunSpec run = tests::run_on({"llama-8b", ModelFamily::Llama, 32, 4096, 32, 8, 14336, 8192, 128256}, "dgx-h100", 4,
                              4, 2, 4, "tp-dp-pp");
  run.exec.global_batch_size = 64;
  run.exec.attention = AttentionKind::Flash;
  run.exec.sequence_parallel = true;
  run.exec.precision = precision;
  run.exec.grad_bits = 16;
  run.exec.zero = 1;
  return run;
}

OptionValues values(std::vector<std::pair<std::string, std::string>> kv) { return tests::planner_values(kv); }

}  // namespace

TEST(RecipeSettings, fp8_weights_are_one_byte_and_gathered_as_one_byte) {
  RecipeSettings r;
  StateBytes b = state_bytes(Precision::FP8, 16, r);
  EXPECT_EQ(b.weights, 3);   // the bf16 weights and their FP8 cache
  EXPECT_EQ(b.gathered, 2);  // the distributed optimizer gathers the bf16 weights, not both
  r.fp8_params = true;
  b = state_bytes(Precision::FP8, 16, r);
  EXPECT_EQ(b.weights, 1);
  EXPECT_EQ(b.gathered, 1);
  EXPECT_EQ(b.optimizer, 12);  // the fp32 master copy stays in the optimizer
  EXPECT_EQ(state_bytes(Precision::FP32, 32).gathered, 4);
}

TEST(RecipeSettings, sixteen_bit_optimizer_states_halve_the_optimizer_bytes_and_its_traffic) {
  RecipeSettings r;
  r.optimizer_state_bits = 16;
  EXPECT_EQ(state_bytes(Precision::BF16, 16, r).optimizer, 6);  // master, momentum, variance at 2 B
  EXPECT_EQ(state_bytes(Precision::FP32, 32, r).optimizer, 4);  // momentum and variance only
  GpuSpec gpu{"x", 80 * kGiB, 312e12, 19.5e12, 2e12};
  CostConstants c;
  c.hbm_efficiency = 1;
  ExecutionSpec x;
  x.grad_bits = 16;
  x.recipe.optimizer_state_bits = 16;
  // read + write 3 states of 2 B, read a 2-byte gradient, write a 2-byte weight.
  EXPECT_DOUBLE_EQ(optimizer_time(1e9, x, gpu, c).bytes_per_param, 2 * 6 + 2 + 2);
  x.recipe.optimizer_state_bits = 32;
  x.precision = Precision::FP8;
  x.recipe.fp8_params = true;
  EXPECT_DOUBLE_EQ(optimizer_time(1e9, x, gpu, c).bytes_per_param, 2 * 12 + 2 + 1);  // writes FP8 weights

  RunSpec run = llama_run(Precision::BF16);
  const Estimate full = estimate(run, 0);
  run.exec.recipe.optimizer_state_bits = 16;
  const Estimate half = estimate(run, 0);
  EXPECT_NEAR(half.peak_memory().optimizer_bytes, full.peak_memory().optimizer_bytes / 2, 1);
  EXPECT_EQ(half.peak_memory().weights_bytes, full.peak_memory().weights_bytes);
}

TEST(RecipeSettings, the_zero1_weight_gather_moves_the_gathered_bytes) {
  // FP8 without FP8 weights gathers the bf16 copy: the same DP traffic as bf16 (it moved 3 B).
  const Estimate bf16 = estimate(llama_run(Precision::BF16), 0);
  RunSpec run = llama_run(Precision::FP8);
  const Estimate fp8 = estimate(run, 0);
  EXPECT_NEAR(fp8.dp.total_s, bf16.dp.total_s, 1e-12);
  run.exec.recipe.fp8_params = true;
  const Estimate fp8w = estimate(run, 0);
  const double params = fp8.dp.gradient_bytes / 2;  // of the stage holding the most, at 16-bit gradients
  const DpPhases ph2 = dp_phases(params * 2, params * 2, 4, 1, fp8.micro_batches, fp8.links.dcp.link,
                                 fp8.links.dcp.members_per_node, run.cluster, fp8.cost);
  const DpPhases ph1 = dp_phases(params * 2, params * 1, 4, 1, fp8.micro_batches, fp8.links.dcp.link,
                                 fp8.links.dcp.members_per_node, run.cluster, fp8.cost);
  EXPECT_NEAR(fp8.dp.total_s, ph2.reduce_scatter_s + ph2.gather_weights_s, 1e-12);
  EXPECT_NEAR(fp8w.dp.total_s, ph1.reduce_scatter_s + ph1.gather_weights_s, 1e-12);
  EXPECT_LT(ph1.gather_weights_s, 0.51 * ph2.gather_weights_s);
  // A quantised GEMM's weight: 3 B (16-bit + FP8 copy), 1 B as FP8 primary weights; the embedding
  // and output layer stay 16-bit either way (no Transformer Engine modules).
  const double plain = 2 * fp8.peak_memory().plain_weight_params;
  ASSERT_GT(plain, 0);
  EXPECT_EQ(fp8w.peak_memory().plain_weight_params, fp8.peak_memory().plain_weight_params);
  EXPECT_NEAR(fp8w.peak_memory().weights_bytes - plain, (fp8.peak_memory().weights_bytes - plain) / 3, 1);
}

TEST(RecipeSettings, cp_allgather_gathers_k_and_v_behind_the_local_block_and_scatters_their_gradients) {
  const ModelSpec m{"llama-8b", ModelFamily::Llama, 32, 4096, 32, 8, 14336, 32768, 128256};
  ExecutionSpec x;
  x.attention = AttentionKind::Flash;
  x.recipe.cp_kind = CpKind::AllGather;
  GroupLink l;
  l.kind = LinkKind::NVLink;
  l.bandwidth_Bps = 100e9;
  l.latency_s = 0;
  l.nodes = 1;
  CostConstants c;
  c.nvlink_efficiency = 1;
  const double block = kv_block_bytes(m, x, 4, 4);
  EXPECT_DOUBLE_EQ(block, 32768.0 / 4 * 2 * 1024 / 4 * 2);  // s/cp x K,V x kv dim / tp x 2 B
  const CpComm cc = cp_comm_per_layer(m, x, 4, 4, l, 1e-4, 2e-4, c);
  const double gather = 3.0 / 4 * 4 * block / 100e9;  // (cp-1)/cp of the cp blocks
  EXPECT_NEAR(cc.gather_s, gather, 1e-15);
  EXPECT_NEAR(cc.forward_exposed_s, std::max(0.0, gather - 1e-4), 1e-15);
  EXPECT_NEAR(cc.backward_total_s, 2 * gather, 1e-15);
  EXPECT_NEAR(cc.backward_exposed_s, std::max(0.0, gather - 2e-4) + gather, 1e-15);
  EXPECT_DOUBLE_EQ(cp_ring_buffer_bytes(m, x, 4, 4), 2 * 4 * block);  // K, V and their gradients, whole
  x.recipe.cp_kind = CpKind::Ring;
  EXPECT_DOUBLE_EQ(cp_ring_buffer_bytes(m, x, 4, 4), 4 * block);
  EXPECT_EQ(cp_comm_per_layer(m, x, 4, 4, l, 1e-4, 2e-4, c).steps, 3);
}

TEST(RecipeSettings, per_chunk_dp_overlap_hides_each_chunk_behind_the_backwards_after_it) {
  // One chunk: the whole reduction behind one micro-batch's backward, the last bucket waits.
  EXPECT_NEAR(chunked_dp(2, 0.1, 1, 2, 1).exposed_s, 1.0, 1e-12);
  EXPECT_NEAR(chunked_dp(0.5, 0.1, 1, 2, 1).exposed_s, 0.1, 1e-12);
  // Two chunks of 1 s, 2 micro-batches per chunk in turn, 0.5 s of backward per chunk: the first
  // chunk's piece starts at -1.5 and ends at -0.5, the second's runs from -0.5 to 0.5.
  const ChunkedDp d = chunked_dp(2, 0.1, 2, 2, 1);
  EXPECT_NEAR(d.gap_s, 1.0, 1e-12);
  EXPECT_NEAR(d.exposed_s, 0.5, 1e-12);

  RunSpec run = llama_run(Precision::BF16);
  run.exec.schedule = ScheduleKind::Interleaved;
  run.exec.virtual_stages = 4;
  run.exec.grad_bits = 32;
  run.exec.global_batch_size = 8;  // 2 micro-batches per pipeline of short sequences: DP shows
  run.model.seq_len = 512;
  const Estimate off = estimate(run, 0);
  run.exec.recipe.dp_overlap_per_chunk = true;
  const Estimate on = estimate(run, 0);
  EXPECT_EQ(on.dp.chunks, 4);
  EXPECT_EQ(on.dp.chunk_group, 2);
  EXPECT_EQ(on.dp.total_s, off.dp.total_s);
  EXPECT_LT(on.dp.exposed_s, off.dp.exposed_s);
  EXPECT_NEAR(on.time.step - off.time.step, on.time.dp_comm - off.time.dp_comm, 1e-12);
}

TEST(RecipeSettings, flags_set_them_bad_values_are_refused_together_and_presets_name_theirs) {
  Problems p;
  ExecutionSpec e = resolve_execution(values({{"precision", "fp8"}, {"fp8-params", "true"}, {"optimizer-state-bits", "16"},
                                              {"cp-kind", "allgather"}, {"dp-overlap-per-chunk", "true"}}),
                                      p);
  ASSERT_TRUE(p.empty()) << p.list().front().what;
  EXPECT_TRUE(e.recipe.fp8_params);
  EXPECT_EQ(e.recipe.optimizer_state_bits, 16);
  EXPECT_EQ(e.recipe.cp_kind, CpKind::AllGather);
  EXPECT_TRUE(e.recipe.dp_overlap_per_chunk);
  Problems bad;
  resolve_execution(values({{"fp8-params", "true"}, {"optimizer-state-bits", "8"}, {"cp-kind", "rign"}}), bad);
  ASSERT_EQ(bad.list().size(), 3u);
  EXPECT_NE(bad.list()[0].what.find("--fp8-params with --precision bf16"), std::string::npos);
  EXPECT_NE(bad.list()[1].what.find("--optimizer-state-bits 8"), std::string::npos);
  EXPECT_NE(bad.list()[2].what.find("--cp-kind 'rign'"), std::string::npos);
  for (const auto& s : stack_presets()) {
    ExecutionSpec x;
    apply_stack(s, x);
    EXPECT_EQ(x.recipe.dp_overlap_per_chunk, s.name == "megatron-core-te") << s.name;
    EXPECT_EQ(x.recipe.cp_kind, s.name == "torchtitan" ? CpKind::AllGather : CpKind::Ring) << s.name;
    EXPECT_EQ(x.recipe.pipeline_sends_whole_tensor, s.name != "megatron-lm-2021") << s.name;
    EXPECT_FALSE(x.recipe.fp8_params);
    EXPECT_EQ(x.recipe.optimizer_state_bits, 32);
  }
  // Explicit flags win over the preset.
  Problems q;
  e = resolve_execution(values({{"stack", "megatron-core-te"}, {"dp-overlap-per-chunk", "false"}}), q);
  EXPECT_FALSE(e.recipe.dp_overlap_per_chunk);
}
