// Each cost-model term against a hand computation.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/cluster_spec.h"
#include "core/units.h"
#include "plan/cost_model.h"

using namespace trident;
using namespace trident::plan;

namespace {

GroupLink link(LinkKind kind, double bw, double lat, int nodes = 1) {
  GroupLink l;
  l.kind = kind;
  l.bandwidth_Bps = bw;
  l.latency_s = lat;
  l.nodes = nodes;
  return l;
}

ModelSpec gpt(int64_t L, int64_t h, int64_t a, int64_t s, int64_t V) {
  ModelSpec m;
  m.layers = L;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.ffn_hidden = 4 * h;
  m.seq_len = s;
  m.vocab = V;
  return m;
}

}  // namespace

TEST(CostModel, vocab_is_padded_to_a_multiple_of_128_times_tp) {
  EXPECT_EQ(padded_vocab(50257, 1), 50304);
  EXPECT_EQ(padded_vocab(50257, 8), 51200);
  EXPECT_EQ(padded_vocab(51200, 8), 51200);
  EXPECT_EQ(padded_vocab(32000, 2), 32000);
}

TEST(CostModel, chunks_split_layers_without_dropping_or_emptying_any) {
  EXPECT_EQ(chunk_layers(96, 8, 1), std::vector<int64_t>(8, 12));
  auto uneven = chunk_layers(10, 4, 1);  // 10 = 4 x 2 + 2: chunks 1 and 2 get one more
  EXPECT_EQ(uneven, (std::vector<int64_t>{2, 3, 3, 2}));
  auto st = stage_layers(96, 4, 3);  // 12 chunks of 8, stage i holds chunks i, i+4, i+8
  EXPECT_EQ(st, std::vector<int64_t>(4, 24));
  int64_t sum = 0;
  for (auto x : chunk_layers(105, 35, 3)) {
    EXPECT_GE(x, 1);
    sum += x;
  }
  EXPECT_EQ(sum, 105);
  // Each stage holds the layers of its chunks i, i + pp, ...: counted by arithmetic, the same sums.
  for (int64_t layers : {1, 7, 32, 61, 96, 105, 126})
    for (int64_t pp : {1, 2, 3, 5, 8, 16, 35})
      for (int64_t v : {1, 2, 3, 4, 7}) {
        if (pp * v > layers) continue;
        std::vector<int64_t> by_chunk(size_t(pp), 0);
        const auto chunks = chunk_layers(layers, pp, v);
        for (size_t c = 0; c < chunks.size(); ++c) by_chunk[c % size_t(pp)] += chunks[c];
        EXPECT_EQ(stage_layers(layers, pp, v), by_chunk) << layers << " layers, pp " << pp << ", v " << v;
      }
}

TEST(CostModel, gemm_efficiency_grows_with_size_towards_the_peak_share) {
  CostConstants c;
  c.gemm_peak_efficiency = 0.8;
  c.gemm_half_dim = 32;
  // A dimension equal to half_dim halves its factor: 0.8 * (32/64) * (1e9/(1e9+32))^2.
  EXPECT_NEAR(gemm_efficiency(32, 1e9, 1e9, c), 0.4, 1e-6);
  EXPECT_LT(gemm_efficiency(128, 4096, 4096, c), gemm_efficiency(4096, 4096, 4096, c));
  EXPECT_LT(gemm_efficiency(4096, 4096, 4096, c), 0.8);
  // Time: 2mkn / (peak * efficiency).
  const double t = gemm_time_s(4096, 4096, 4096, 1, 312e12, c);
  EXPECT_NEAR(t, 2.0 * 4096 * 4096 * 4096 / (312e12 * gemm_efficiency(4096, 4096, 4096, c)), 1e-12);
}

TEST(CostModel, ring_collectives_follow_alpha_beta) {
  CostConstants c;
  c.nvlink_efficiency = 0.5;
  const GroupLink nv = link(LinkKind::NVLink, 100e9, 1e-6);
  // All-reduce: 2(n-1) alpha + 2(n-1)/n S / (beta eff) = 14e-6 + 2*7/8*1e9/50e9 = 0.035014 s.
  EXPECT_NEAR(ring_allreduce_time_s(1e9, 8, nv, c), 14e-6 + 0.035, 1e-12);
  // All-gather: 7e-6 + 7/8 * 1e9 / 50e9.
  EXPECT_NEAR(ring_allgather_time_s(1e9, 8, nv, c), 7e-6 + 0.0175, 1e-12);
  EXPECT_EQ(ring_allreduce_time_s(1e9, 1, nv, c), 0);
  // Point to point: alpha + S / (beta eff).
  EXPECT_NEAR(p2p_time_s(1e6, nv, c), 1e-6 + 1e6 / 50e9, 1e-15);
}

TEST(CostModel, hierarchical_allreduce_matches_the_formula) {
  CostConstants c;
  c.nvlink_efficiency = 1;
  c.network_efficiency = 1;
  LinkSpec intra{LinkKind::NVLink, 300e9, 2e-6};
  // g = 8 per node, k = 4 nodes, S = 8e9, inter 25e9 per GPU, 5 us:
  // 2[(7)(2e-6) + 7/8 * 8e9/300e9] + 2*3*5e-6 + 2*3/4 * (1e9)/25e9
  const double want = 2 * (7 * 2e-6 + 7.0 / 8 * 8e9 / 300e9) + 6 * 5e-6 + 1.5 * 1e9 / 25e9;
  EXPECT_NEAR(hierarchical_allreduce_time_s(8e9, 8, 4, intra, 25e9, 5e-6, c), want, 1e-12);
}

TEST(CostModel, layer_flops_are_megatrons_24bsh2_and_4bs2h_over_t) {
  const ModelSpec m = gpt(96, 12288, 96, 2048, 50257);
  ExecutionSpec e;
  e.micro_batch_size = 2;
  GpuSpec gpu{"a100", 80 * kGiB, 312e12, 19.5e12, 2039e9};
  const auto lc = layer_compute(m, e, 8, gpu, default_constants());
  const double b = 2, s = 2048, h = 12288, t = 8;
  EXPECT_NEAR(lc.gemm_flops, 24 * b * s * h * h / t, 1);
  EXPECT_NEAR(lc.attention_flops, 4 * b * s * s * h / t, 1);
  EXPECT_GT(lc.elementwise_s, 0);
  // Twice the work; the kernel calls' fixed costs as counted (dgrad and wgrad: twice the GEMMs' calls).
  EXPECT_NEAR(lc.backward_s() - lc.launch_backward_s(), 2 * (lc.forward_s() - lc.launch_forward_s()), 1e-15);
  EXPECT_GT(lc.launch_backward_s(), lc.launch_forward_s());
}

TEST(CostModel, tp_collectives_are_two_per_pass_plus_two_for_full_recompute) {
  const ModelSpec m = gpt(96, 12288, 96, 2048, 50257);
  ExecutionSpec e;
  const GroupLink nv = link(LinkKind::NVLink, 300e9, 3e-6);
  auto tc = tp_comm_per_layer(m, e, 8, nv, default_constants());
  EXPECT_DOUBLE_EQ(tc.message_bytes, 2048.0 * 12288 * 2);
  EXPECT_EQ(tc.forward_collectives, 2);
  EXPECT_EQ(tc.backward_collectives, 2);
  EXPECT_NEAR(tc.collective_s, ring_allreduce_time_s(tc.message_bytes, 8, nv, default_constants()), 1e-15);
  e.recompute = Recompute::Full;
  EXPECT_EQ(tp_comm_per_layer(m, e, 8, nv, default_constants()).backward_collectives, 4);
  EXPECT_EQ(tp_comm_per_layer(m, e, 1, nv, default_constants()).forward_s, 0);
}

// TP overlap (--overlap tp) runs every TP collective behind the GEMMs only under sequence
// parallelism (Megatron-Core's --tp-comm-overlap needs it). Without it the forward's two
// all-reduces block; backward the two column-parallel input-gradient all-reduces run behind the
// QKV and MLP-in weight-gradient GEMMs, and full recomputation's forward all-reduces block.
TEST(CostModel, tp_overlap_without_sequence_parallel_hides_only_the_input_gradient_all_reduces) {
  const ModelSpec m = gpt(96, 12288, 96, 2048, 50257);
  const GpuSpec gpu = gpu_preset("h100-80g");
  const GroupLink nv = link(LinkKind::NVLink, 450e9, 3e-6);
  const CostConstants c = default_constants();
  for (Recompute r : {Recompute::None, Recompute::Full}) {
    ExecutionSpec e;
    e.overlap.tp = true;
    e.recompute = r;
    const LayerCompute lc = layer_compute(m, e, 8, gpu, c);
    const TpComm tc = tp_comm_per_layer(m, e, 8, nv, c);
    // QKV (h x 3h/8) and MLP-in (h x 4h/8): 7 of the layer's 12 h^2/8 GEMM parts, about 7/12 of its time.
    EXPECT_GT(lc.column_gemm_s, 0.5 * lc.gemm_s);
    EXPECT_LT(lc.column_gemm_s, 0.65 * lc.gemm_s);
    const TpOverlap o = tp_overlap_per_layer(lc, tc, e, 8, c);
    EXPECT_DOUBLE_EQ(o.forward.exposed_s, tc.forward_s);
    EXPECT_EQ(o.forward.hidden_s, 0);
    const double async_s = 2 * tc.collective_s;
    const double hidden = std::min(async_s, lc.column_gemm_s);
    EXPECT_NEAR(o.backward.hidden_s, hidden, 1e-15);
    EXPECT_NEAR(o.backward.exposed_s, tc.backward_s - hidden, 1e-15);
    EXPECT_NEAR(o.backward.cost_s, tc.backward_s - hidden + c.overlap_slowdown * hidden, 1e-15);
    e.sequence_parallel = true;  // all of it behind the GEMMs, in tp pieces of which the first waits
    const TpComm sp = tp_comm_per_layer(m, e, 8, nv, c);
    const TpOverlap all = tp_overlap_per_layer(lc, sp, e, 8, c);
    EXPECT_NEAR(all.forward.exposed_s, sp.forward_s / 8, 1e-15);
  }
}

TEST(CostModel, pipeline_message_is_bsh_over_t) {
  const ModelSpec m = gpt(96, 12288, 96, 2048, 50257);
  ExecutionSpec e;
  const GroupLink ib = link(LinkKind::InfiniBand, 25e9, 5e-6, 2);
  const GroupLink nvlink = link(LinkKind::NVLink, 300e9, 3e-6);
  const auto& c = default_constants();
  const double wire = 5e-6 + 2048.0 * 12288 * 2 / 8 / (25e9 * c.network_efficiency);
  // Sequence parallel: each TP rank sends its own s/t rows and keeps them; nothing to gather.
  e.sequence_parallel = true;
  auto pc = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  EXPECT_DOUBLE_EQ(pc.message_bytes, 2048.0 * 12288 * 2 / 8);
  EXPECT_NEAR(pc.message_s, wire, 1e-15);
  EXPECT_EQ(pc.gather_s, 0.0);
  // The same rows whether or not the stack sends whole tensors without it.
  e.recipe.pipeline_sends_whole_tensor = false;
  const PpComm rows = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  EXPECT_EQ(rows.split, 8);
  EXPECT_EQ(rows.message_s, pc.message_s);
  // Without it (Megatron-LM's scatter/gather) the receiver all-gathers the 8 shares of the
  // 48 MiB tensor on NVLink: 7 latencies + 7/8 x 48 MiB at 300 GB/s x nvlink_efficiency.
  e.sequence_parallel = false;
  pc = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  const double gather = 7 * 3e-6 + 7.0 / 8 * 2048.0 * 12288 * 2 / (300e9 * c.nvlink_efficiency);
  EXPECT_NEAR(pc.wire_s, wire, 1e-15);
  EXPECT_NEAR(pc.gather_s, gather, 1e-15);
  EXPECT_NEAR(pc.message_s, wire + gather, 1e-15);
  // Megatron-Core's and DeepSpeed's whole tensor from every rank: nothing to gather either.
  e.recipe.pipeline_sends_whole_tensor = true;
  pc = pp_comm_per_message(m, e, 8, ib, nvlink, c);
  EXPECT_DOUBLE_EQ(pc.message_bytes, 2048.0 * 12288 * 2);
  EXPECT_EQ(pc.gather_s, 0.0);
}

TEST(CostModel, pipeline_time_of_uniform_stages_is_the_closed_form) {
  std::vector<StageTime> stages(8);
  for (auto& s : stages) s.compute_forward_s = 1, s.compute_backward_s = 2;  // T = 3
  // 1F1B: (m + p - 1) T; interleaved v: (m + (p-1)/v) T; ZB-H1: (m + (p-1)/3) T.
  EXPECT_NEAR(pipeline_time(stages, 16, ScheduleKind::OneFOneB, 1).total_s, (16 + 7) * 3.0, 1e-12);
  EXPECT_NEAR(pipeline_time(stages, 16, ScheduleKind::Interleaved, 2).total_s, (16 + 3.5) * 3.0, 1e-12);
  EXPECT_NEAR(pipeline_time(stages, 16, ScheduleKind::ZeroBubbleH1, 1).bubble_s, 7.0, 1e-12);
  // The bubble share (p-1)/(m+p-1).
  auto p = pipeline_time(stages, 16, ScheduleKind::GPipe, 1);
  EXPECT_NEAR(p.bubble_s / p.total_s, 7.0 / 23.0, 1e-12);
  // A slower last stage paces the steady state.
  stages.back().compute_backward_s = 3;
  EXPECT_NEAR(pipeline_time(stages, 16, ScheduleKind::OneFOneB, 1).total_s, 16 * 4.0 + 7 * 3.0, 1e-12);
}

TEST(CostModel, model_flops_match_narayanans_formula) {
  const ModelSpec m = gpt(96, 12288, 96, 2048, 51200);
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double want = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  EXPECT_NEAR(model_flops_per_step(m, 1536, 51200) / want, 1.0, 1e-12);
}

TEST(CostModel, optimizer_moves_30_bytes_per_param_for_bf16_adam_with_fp32_grads) {
  GpuSpec gpu{"x", 80 * kGiB, 312e12, 19.5e12, 2e12};
  CostConstants c;
  c.hbm_efficiency = 1;
  ExecutionSpec x;
  x.precision = Precision::BF16;
  x.grad_bits = 32;
  auto o = optimizer_time(1e9, x, gpu, c);
  EXPECT_DOUBLE_EQ(o.bytes_per_param, 30);
  EXPECT_NEAR(o.time_s, 1e9 * 30 / 2e12, 1e-15);
}

TEST(CostModel, dp_reduction_hides_behind_backward_except_the_last_bucket) {
  CostConstants c;
  ClusterSpec cl = cluster_preset("dgx-a100-80g");
  cl.nodes = 4;
  const GroupLink ib = link(LinkKind::InfiniBand, 25e9, 5e-6, 4);
  auto d = dp_comm(4e9, 4, ib, 1, cl, 10.0, c);
  EXPECT_NEAR(d.total_s, ring_allreduce_time_s(4e9, 4, ib, c), 1e-12);
  EXPECT_NEAR(d.exposed_s, d.total_s * c.dp_bucket_bytes() / 4e9, 1e-12);  // window is long: last bucket only
  auto short_window = dp_comm(4e9, 4, ib, 1, cl, 0.01, c);
  EXPECT_NEAR(short_window.exposed_s, short_window.total_s - 0.01, 1e-12);
  EXPECT_FALSE(d.hierarchical);
  EXPECT_TRUE(dp_comm(4e9, 16, ib, 4, cl, 0, c).hierarchical);
}

TEST(CostModel, zero_stages_schedule_their_data_parallel_traffic) {
  ClusterSpec cl = cluster_preset("dgx-a100-80g");
  cl.nodes = 4;
  const GroupLink ib = link(LinkKind::InfiniBand, 25e9, 5e-6, 4);
  const auto& c = default_constants();
  auto z1 = dp_phases(4e9, 2e9, 4, 1, 16, ib, 1, cl, c);
  EXPECT_EQ(z1.reduce_scatters_per_step, 1);
  EXPECT_EQ(z1.weight_gathers_per_step, 1);
  EXPECT_NEAR(z1.reduce_scatter_s, ring_allreduce_time_s(4e9, 4, ib, c) / 2, 1e-12);
  EXPECT_NEAR(z1.gather_weights_s, ring_allreduce_time_s(2e9, 4, ib, c) / 2, 1e-12);
  EXPECT_EQ(dp_phases(4e9, 2e9, 4, 2, 16, ib, 1, cl, c).reduce_scatters_per_step, 16);
  EXPECT_EQ(dp_phases(4e9, 2e9, 4, 3, 16, ib, 1, cl, c).weight_gathers_per_step, 32);
  EXPECT_EQ(dp_phases(4e9, 2e9, 1, 3, 16, ib, 1, cl, c).allreduce_s, 0);
}

TEST(CostModel, stage_times_add_embedding_logits_and_two_sends_per_chunk) {
  const ModelSpec m = gpt(8, 4096, 32, 2048, 51200);
  ExecutionSpec e;
  e.schedule = ScheduleKind::Interleaved;
  e.virtual_stages = 2;
  GpuSpec gpu{"a100", 80 * kGiB, 312e12, 19.5e12, 2039e9};
  StageInputs in{8, 2, link(LinkKind::NVLink, 300e9, 3e-6), link(LinkKind::InfiniBand, 25e9, 5e-6, 2)};
  const auto& c = default_constants();
  auto st = stage_times(m, e, in, gpu, c);
  ASSERT_EQ(st.size(), 2u);
  const auto pc = pp_comm_per_message(m, e, 8, in.pp_link, in.tp_link, c);
  EXPECT_NEAR(st[0].pp_comm_s, 2 * 2 * pc.message_s, 1e-15);  // 2 sends x v 2 chunks
  const auto tc = tp_comm_per_layer(m, e, 8, in.tp_link, c);
  EXPECT_NEAR(st[0].tp_comm_s, 4 * (tc.forward_s + tc.backward_s) + tc.collective_s, 1e-12);  // + embedding all-reduce
  // Last stage: the logits GEMM adds 3 x 2 T h V / t FLOPs.
  EXPECT_NEAR(st[1].model_flops - st[0].model_flops, 3 * 2.0 * 2048 * 4096 * 51200 / 8, 1e3);
}
