// The software-stack terms of the cost and memory models against hand computations: flash
// attention, FP8, overlap of TP / PP / DP, the gradient-reduction dtype, ZeRO-3 layer by layer.
#include <gtest/gtest.h>

#include "core/units.h"
#include "plan/cost_model.h"
#include "plan/estimate.h"
#include "plan/memory_model.h"
#include "plan/search.h"

using namespace trident;
using namespace trident::plan;

namespace {

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

GroupLink link(LinkKind kind, double bw, double lat, int nodes = 1) {
  GroupLink l;
  l.kind = kind;
  l.bandwidth_Bps = bw;
  l.latency_s = lat;
  l.nodes = nodes;
  return l;
}

}  // namespace

TEST(StackTerms, flash_attention_runs_the_causal_half_at_its_kernel_efficiency) {
  const ModelSpec m = gpt(2, 4096, 32, 4096, 32000);
  ExecutionSpec e;
  e.micro_batch_size = 2;
  e.attention = AttentionKind::Flash;
  const GpuSpec gpu = gpu_preset("h100-80g");
  CostConstants c;
  c.attention_efficiency = 0.5;
  c.flash_backward_factor = 2.5;
  const auto lc = layer_compute(m, e, 2, gpu, c);
  // 4 b (a/t) s^2 d / 2 = 4 * 2 * 16 * 4096^2 * 128 / 2 FLOP at 989e12 * 0.5.
  const double flops = 4.0 * 2 * 16 * 4096.0 * 4096 * 128 / 2;
  EXPECT_NEAR(lc.attention_s, flops / (989e12 * 0.5), 1e-12);
  EXPECT_NEAR(lc.attention_backward_s, 2.5 * lc.attention_s, 1e-12);
  EXPECT_EQ(lc.attention_elementwise_s, 0);  // no scores to softmax in HBM
  // Unfused: the scores' softmax/dropout traffic is there and the backward is twice the forward.
  e.attention = AttentionKind::Unfused;
  const auto un = layer_compute(m, e, 2, gpu, c);
  EXPECT_GT(un.attention_elementwise_s, 0);
  EXPECT_NEAR(un.attention_backward_s, 2 * un.attention_s, 1e-15);
  EXPECT_GT(un.forward_s(), lc.forward_s());
}

TEST(StackTerms, flash_attention_stores_34sbh_over_t_with_sequence_parallel) {
  const ModelSpec m = model_preset("gpt3-175b");
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.sequence_parallel = true;
  const double s = 2048, b = 1, h = 12288, a = 96, t = 4;
  // Korthikanti's 34 s b h / t, plus the fp32 softmax statistics (4 a s b / t bytes).
  EXPECT_NEAR(layer_activations(m, e, 4).bytes, 34 * s * b * h / t + 4 * a * s * b / t, 1);
  EXPECT_EQ(layer_activations(m, e, 4).attention_scores_bytes, 0);
  // Unfused keeps the 5 a s / h term: s b h (34 + 5 a s / h) / t.
  e.attention = AttentionKind::Unfused;
  EXPECT_NEAR(layer_activations(m, e, 4).bytes, s * b * h * (34 + 5 * a * s / h) / t, 1);
}

TEST(StackTerms, fp8_runs_weight_gemms_at_the_fp8_peak_and_pays_the_casts) {
  const ModelSpec m = gpt(2, 8192, 64, 2048, 32000);
  ExecutionSpec e;
  const GpuSpec gpu = gpu_preset("h100-80g");
  CostConstants c;
  c.gemm_half_dim = 0;  // no size penalty: the hand computation is FLOP / rate
  c.gemm_peak_efficiency = 0.6;
  c.fp8_gemm_efficiency = 0.5;
  c.fp8_cast_bytes_per_element = 3;
  const auto bf16 = layer_compute(m, e, 1, gpu, c);
  e.precision = Precision::FP8;
  const auto fp8 = layer_compute(m, e, 1, gpu, c);
  EXPECT_NEAR(bf16.gemm_s, bf16.gemm_flops / (989e12 * 0.6), 1e-12);
  EXPECT_NEAR(fp8.gemm_s, fp8.gemm_flops / (1979e12 * 0.5), 1e-12);
  // Casts: 3 bytes per input element of the four GEMMs, T (h + h + h + 4h) at 3350 GB/s * 0.8.
  const double T = 2048;
  EXPECT_NEAR(fp8.fp8_cast_s, 3 * T * (3 * 8192.0 + 4 * 8192) / (3350e9 * c.hbm_efficiency), 1e-12);
  EXPECT_NEAR(fp8.elementwise_s - bf16.elementwise_s, fp8.fp8_cast_s, 1e-12);
  EXPECT_EQ(fp8.attention_s, bf16.attention_s);  // attention stays bf16
  // An FP8 copy of the weights is kept: 3 bytes of weights per parameter.
  EXPECT_EQ(state_bytes(Precision::FP8, 32).weights, 3);
}

TEST(StackTerms, fp8_keeps_fp8_copies_of_the_gemm_inputs_for_the_weight_gradients_instead_of_16_bit_ones) {
  const ModelSpec m = model_preset("gpt3-175b");
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.sequence_parallel = true;
  const double s = 2048, b = 1, h = 12288, a = 96, t = 4, sbh = s * b * h;
  const double bf16 = layer_activations(m, e, 4).bytes;
  e.precision = Precision::FP8;
  const LayerActivations fp8 = layer_activations(m, e, 4);
  // One byte per element of the QKV and MLP inputs (2sbh), the projection input (sbh) and the
  // MLP-out input (sbf = 4sbh), all split by t with sequence parallel: 7 sbh / t.
  EXPECT_NEAR(fp8.fp8_copy_bytes, 7 * sbh / t, 1);
  // Transformer Engine keeps those copies instead of the 16-bit QKV and MLP inputs (2 x 2sbh) and
  // MLP-out input (2 x 4sbh); the projection input stays 16-bit too (the attention's backward).
  EXPECT_NEAR(fp8.fp8_given_up_bytes, 12 * sbh / t, 1);
  EXPECT_NEAR(fp8.bytes, 34 * sbh / t + 4 * a * s * b / t + 7 * sbh / t - 12 * sbh / t, 1);
  EXPECT_NEAR(fp8.bytes - bf16, fp8.fp8_copy_bytes - fp8.fp8_given_up_bytes, 1);
  // Full recomputation keeps only the layer input: the copies are rebuilt with the rest.
  e.recompute = Recompute::Full;
  EXPECT_EQ(layer_activations(m, e, 4).fp8_copy_bytes, 0);
  // The copies are the casts' output: the memory-bound kernels' traffic does not count them twice.
  ExecutionSpec x;
  x.attention = AttentionKind::Flash;
  x.sequence_parallel = true;
  const GpuSpec gpu = gpu_preset("h100-80g");
  const CostConstants c;
  const auto lb = layer_compute(m, x, 4, gpu, c);
  x.precision = Precision::FP8;
  const auto lf = layer_compute(m, x, 4, gpu, c);
  EXPECT_NEAR(lf.elementwise_s - lb.elementwise_s, lf.fp8_cast_s, 1e-12);
}

TEST(StackTerms, flash_attention_recompute_counts_in_executed_flops_not_in_model_flops) {
  RunSpec r;
  r.model = model_preset("gpt3-175b");
  r.cluster = cluster_preset("dgx-h100");
  r.cluster.nodes = 8;
  r.layout.tp = 8;
  r.layout.pp = 8;
  r.layout.dp = 1;
  r.exec.global_batch_size = 32;
  r.exec.sequence_parallel = true;
  const Estimate unfused = estimate(r, 0);
  r.exec.attention = AttentionKind::Flash;
  const Estimate flash = estimate(r, 0);
  EXPECT_EQ(unfused.flash_recompute_flops, 0);
  // QK^T again in every layer's backward: half the attention FLOPs, 4 b s^2 h / 2 per layer and
  // micro-batch, over the whole model and batch.
  const double s = 2048, h = 12288;
  EXPECT_NEAR(flash.flash_recompute_flops, 32 * 96 * 4 * s * s * h / 2, 1e6);
  EXPECT_NEAR(flash.executed_flops - flash.flash_recompute_flops, unfused.executed_flops, 1e6);
  EXPECT_EQ(flash.model_flops, unfused.model_flops);  // MFU counts model FLOPs only
}

TEST(StackTerms, overlap_hides_what_the_window_covers_and_charges_a_slowdown) {
  CostConstants c;
  c.overlap_slowdown = 0.1;
  // 10 ms behind 6 ms of compute: 4 ms exposed, 6 hidden, cost 4 + 0.6.
  auto o = overlap_with(10e-3, 6e-3, 0, c);
  EXPECT_NEAR(o.exposed_s, 4e-3, 1e-15);
  EXPECT_NEAR(o.hidden_s, 6e-3, 1e-15);
  EXPECT_NEAR(o.cost_s, 4.6e-3, 1e-15);
  // Pipelined in 4 pieces behind a long window: the first piece (2.5 ms) still waits.
  o = overlap_with(10e-3, 1, 4, c);
  EXPECT_NEAR(o.exposed_s, 2.5e-3, 1e-15);
  EXPECT_NEAR(o.cost_s, 2.5e-3 + 0.1 * 7.5e-3, 1e-15);
  EXPECT_EQ(not_overlapped(3e-3).cost_s, 3e-3);
}

TEST(StackTerms, tp_and_pp_overlap_in_stage_times) {
  const ModelSpec m = gpt(8, 8192, 64, 2048, 51200);
  ExecutionSpec e;
  e.global_batch_size = 8;
  e.sequence_parallel = true;
  const GpuSpec gpu = gpu_preset("h100-80g");
  const CostConstants c = builtin_cost(gpu);
  StageInputs in{4, 2, link(LinkKind::NVLink, 450e9, 3e-6), link(LinkKind::InfiniBand, 50e9, 5e-6, 2)};
  const auto plain = stage_times(m, e, in, gpu, c);
  e.overlap = {true, true, true};
  const auto over = stage_times(m, e, in, gpu, c);
  const auto lc = layer_compute(m, e, 4, gpu, c);
  const auto tc = tp_comm_per_layer(m, e, 4, in.tp_link, c);
  const auto pc = pp_comm_per_message(m, e, 4, in.pp_link, in.tp_link, c);
  // Stage 1 (last, 4 layers): TP per layer behind the forward GEMMs and the backward's 2x.
  const double tp = 4 * (overlap_with(tc.forward_s, lc.gemm_s, 4, c).cost_s +
                         overlap_with(tc.backward_s, 2 * lc.gemm_s, 4, c).cost_s) +
                    tc.collective_s;  // the logits gather, blocking
  EXPECT_NEAR(over[1].tp_comm_s, tp, 1e-12);
  EXPECT_NEAR(plain[1].tp_comm_s, 4 * (tc.forward_s + tc.backward_s) + tc.collective_s, 1e-12);
  EXPECT_LT(over[1].tp_comm_s, plain[1].tp_comm_s);
  // PP: each send hides behind a 4-layer chunk's compute; only the slowdown remains.
  EXPECT_NEAR(over[1].pp_comm_s, 2 * c.overlap_slowdown * pc.message_s, 1e-12);
  EXPECT_NEAR(plain[1].pp_comm_s, 2 * pc.message_s, 1e-15);
  EXPECT_NEAR(over[1].pp_hidden_s, 2 * pc.message_s, 1e-15);
}

namespace {
RunSpec dp_run(int zero) {
  RunSpec r;
  r.model = model_preset("gpt3-13b");
  r.cluster = cluster_preset("dgx-a100-80g");
  r.cluster.nodes = 4;
  r.layout = Layout{1, 1, 32, 1, "tp-dp-pp"};
  r.exec.global_batch_size = 64;
  r.exec.micro_batch_size = 1;
  r.exec.zero = zero;
  return r;
}
}  // namespace

TEST(StackTerms, dp_without_overlap_exposes_the_whole_reduction_and_grad_bits_halve_it) {
  RunSpec r = dp_run(0);
  const Estimate with = estimate(r, 0);
  r.exec.overlap.dp = false;
  const Estimate without = estimate(r, 0);
  EXPECT_NEAR(without.dp.exposed_s, without.dp.total_s, 1e-12);
  EXPECT_LT(with.dp.exposed_s, without.dp.exposed_s);
  r.exec.grad_bits = 16;
  const Estimate half = estimate(r, 0);
  EXPECT_NEAR(half.dp.gradient_bytes, without.dp.gradient_bytes / 2, 1);
  EXPECT_LT(half.dp.total_s, 0.51 * without.dp.total_s);
}

TEST(StackTerms, zero3_gathers_every_layer_and_is_network_bound_when_layers_are_short) {
  RunSpec r = dp_run(3);
  r.cluster = cluster_preset("pcie-a100-40g");  // PCIe inside the node, 2 x HDR per node
  r.cluster.nodes = 4;
  const Estimate e = estimate(r, 0);
  const int64_t L = r.model.layers, m = e.micro_batches;
  const double g = e.dp.layer_gather_s, s = e.dp.layer_scatter_s;
  ASSERT_GT(g, 0);
  const StageTime& st = e.stages[0];
  const double f = (st.compute_forward_s + st.tp_comm_s / 3) / double(L);
  const double b = (st.compute_backward_s + 2 * st.tp_comm_s / 3) / double(L);
  // One micro-batch of 2048 tokens per layer is shorter than its gather over PCIe and HDR.
  ASSERT_GT(g, f);
  const double exposed = double(m) * (g + double(L - 1) * std::max(0.0, g - f) + s +
                                      double(L - 1) * std::max(0.0, g + s - b));
  const double total = double(m) * double(L) * (2 * g + s);
  EXPECT_NEAR(e.dp.total_s, total, 1e-9);
  EXPECT_NEAR(e.dp.exposed_s, exposed + e.cost.overlap_slowdown * (total - exposed), 1e-9);
  // Two layers' unsharded 16-bit weights are resident.
  const ParamCount pc = count_parameters(r.model);
  EXPECT_NEAR(e.memory[0].gathered_weights_bytes, 2 * 2.0 * double(pc.per_layer), 1);
}

TEST(StackTerms, the_search_considers_fsdp_with_pipeline_parallel) {
  SearchSpace space;
  space.zero = 3;
  space.size(Dim::PP) = 2;
  space.size(Dim::TP) = 1;
  ClusterSpec cluster = cluster_preset("dgx-a100-80g");
  cluster.nodes = 2;
  const auto res = search(model_preset("gpt3-1.3b"), cluster, 64, space, 3, 0);
  ASSERT_FALSE(res.best.empty());
  EXPECT_EQ(res.best.front().run.exec.zero, 3);
  EXPECT_EQ(res.best.front().run.layout.pp, 2);
}

TEST(StackTerms, fp8_fused_casts_drop_the_qkv_fc1_and_fc2_input_casts) {
  // h 8192, f 32768, tp 4, T 2048 tokens, 3 B per cast element at 3350 GB/s x 0.8.
  const ModelSpec m = gpt(2, 8192, 64, 2048, 32000);
  ExecutionSpec e;
  e.precision = Precision::FP8;
  const GpuSpec gpu = gpu_preset("h100-80g");
  CostConstants c;
  c.fp8_cast_bytes_per_element = 3;
  const auto apart = layer_compute(m, e, 4, gpu, c);
  e.recipe.fp8_fused_casts = true;
  const auto fused = layer_compute(m, e, 4, gpu, c);
  // By hand: apart, QKV 2048 x 8192 + projection 2048 x 2048 + FC1 2048 x 8192 + FC2 2048 x 8192
  // = 54,525,952 elements; fused, the projection's 4,194,304 alone, 50,331,648 removed.
  EXPECT_DOUBLE_EQ(apart.fp8_cast_elements, 54525952.0);
  EXPECT_DOUBLE_EQ(apart.fp8_fused_cast_elements, 0.0);
  EXPECT_DOUBLE_EQ(fused.fp8_cast_elements, 4194304.0);
  EXPECT_DOUBLE_EQ(fused.fp8_fused_cast_elements, 50331648.0);
  // 3 x 4,194,304 B = 12,582,912 B at 2680 GB/s: 4.6951 us.
  EXPECT_NEAR(fused.fp8_cast_s, 12582912.0 / 2680e9, 1e-15);
  EXPECT_NEAR(apart.elementwise_s - fused.elementwise_s, 3 * 50331648.0 / 2680e9, 1e-12);
  EXPECT_NEAR(fused.fp8_fused_cast_s, 3 * 50331648.0 / 2680e9, 1e-15);
  // The forward saves the fused casts' 56.34 us; the backward's gradient casts are paid as before.
  EXPECT_NEAR(apart.forward_s() - fused.forward_s(), 3 * 50331648.0 / 2680e9 + 3 * c.kernel_overhead_s(), 1e-12);
  EXPECT_NEAR(apart.backward_s(), fused.backward_s(), 1e-12);
  // One forward cast kernel left (the projection's); the backward's gradient casts stay four.
  EXPECT_EQ(apart.kernels.forward.casts, 4);
  EXPECT_EQ(fused.kernels.forward.casts, 1);
  EXPECT_EQ(fused.kernels.backward.casts, 4);
  // bf16 has no casts, fused or not; a MoE layer's experts read permuted tokens: QKV fused alone.
  e.precision = Precision::BF16;
  EXPECT_EQ(layer_compute(m, e, 4, gpu, c).fp8_cast_elements, 0);
  EXPECT_EQ(fused_fp8_casts(m, e).qkv, false);
  e.precision = Precision::FP8;
  ModelSpec moe = m;
  moe.experts = 8;
  moe.experts_per_token = 2;
  const FusedCasts fm = fused_fp8_casts(moe, e);
  EXPECT_TRUE(fm.qkv);
  EXPECT_FALSE(fm.fc1);
  EXPECT_FALSE(fm.fc2);
  // The stacks: megatron-core-te fuses them (Transformer Engine), the others do not.
  for (const auto& s : stack_presets()) {
    ExecutionSpec x;
    apply_stack(s, x);
    EXPECT_EQ(x.recipe.fp8_fused_casts, s.name == "megatron-core-te") << s.name;
  }
}

TEST(StackTerms, a_fused_swiglu_keeps_the_gate_and_up_output_and_the_product_eager_ops_also_silu) {
  // Llama 3 70B at tp 4 with sequence parallel and flash attention, one 8192-token sequence.
  ModelSpec m = model_preset("llama3-70b");
  m.seq_len = 8192;
  ExecutionSpec e;
  e.attention = AttentionKind::Flash;
  e.sequence_parallel = true;
  const double t = 4, sb = 8192, h = 8192, kv = 1024, f = 28672;
  const double fused = layer_activations(m, e, 4).bytes;
  // Outside the TP region (split by t): the two norm inputs and outputs, 8 sbh; inside: Q (2sbh),
  // K and V (4 s b kv), the projection input (2sbh), the MLP's gate and up output (4sbf) and the
  // product (2sbf); the softmax statistics (4 bytes per row and head).
  EXPECT_NEAR(fused, (8 * sb * h + 2 * sb * h + 4 * sb * kv + 2 * sb * h + 6 * sb * f + 4 * 64 * sb) / t, 1);
  e.recipe.fused_swiglu = false;  // silu(gate) kept too
  EXPECT_NEAR(layer_activations(m, e, 4).bytes - fused, 2 * sb * f / t, 1);
  // Unfused attention repeats the 8 kv heads to the 64 query heads and keeps them (4 s b h, not
  // 4 s b kv) and the softmax output (2 a s^2 b, Llama has no dropout), not the statistics.
  ExecutionSpec unfused = e;
  unfused.attention = AttentionKind::Unfused;
  EXPECT_NEAR(layer_activations(m, unfused, 4).bytes - layer_activations(m, e, 4).bytes,
              (4 * sb * h - 4 * sb * kv + 2 * 64 * sb * sb - 4 * 64 * sb) / t, 1);
  // GPT's GELU MLP keeps its input and output either way.
  const ModelSpec g = model_preset("gpt3-175b");
  const double eager_gelu = layer_activations(g, e, 4).bytes;
  e.recipe.fused_swiglu = true;
  EXPECT_EQ(layer_activations(g, e, 4).bytes, eager_gelu);
  // The stacks: eager PyTorch in DeepSpeed-Megatron's and torchtitan's MLPs, fused elsewhere.
  for (const auto& s : stack_presets()) {
    ExecutionSpec x;
    apply_stack(s, x);
    EXPECT_EQ(x.recipe.fused_swiglu, s.name != "deepspeed" && s.name != "torchtitan") << s.name;
  }
}

TEST(StackTerms, stack_compute_efficiency_divides_every_compute_term_but_the_launches) {
  // GPT 4096 wide, 2 layers, tp 2, flash and unfused, at 0.8 of the table's rates: the GEMM,
  // attention and element-wise times are 1/0.8 = 1.25x, the per-call launch cost stays.
  const ModelSpec m = gpt(2, 4096, 32, 2048, 32000);
  const GpuSpec gpu = gpu_preset("a100-80g");
  CostConstants c;
  c.kernel_launch_us = 4;
  for (AttentionKind a : {AttentionKind::Unfused, AttentionKind::Flash}) {
    ExecutionSpec e;
    e.attention = a;
    const LayerCompute full = layer_compute(m, e, 2, gpu, c);
    e.recipe.compute_efficiency = 0.8;
    const LayerCompute slow = layer_compute(m, e, 2, gpu, c);
    EXPECT_NEAR(slow.gemm_s, full.gemm_s / 0.8, 1e-15);
    EXPECT_NEAR(slow.attention_s, full.attention_s / 0.8, 1e-15);
    EXPECT_NEAR(slow.attention_backward_s, full.attention_backward_s / 0.8, 1e-15);
    EXPECT_NEAR(slow.elementwise_s, full.elementwise_s / 0.8, 1e-15);
    EXPECT_DOUBLE_EQ(slow.launch_forward_s(), full.launch_forward_s());
    EXPECT_GT(slow.launch_forward_s(), 0);
    // The last stage's logits GEMM and loss too: its compute less the launches, 1.25x.
    StageInputs in{2, 1, {}, {}};
    e.recipe.compute_efficiency = 1.0;
    const StageTime a1 = stage_times(m, e, in, gpu, c).back();
    e.recipe.compute_efficiency = 0.8;
    const StageTime a8 = stage_times(m, e, in, gpu, c).back();
    EXPECT_NEAR(a8.compute_forward_s + a8.compute_backward_s - a8.launch_s,
                (a1.compute_forward_s + a1.compute_backward_s - a1.launch_s) / 0.8, 1e-12);
  }
  // Only --stack deepspeed carries a measured ratio; the stacks the tables measure run at 1.
  for (const auto& s : stack_presets()) {
    ExecutionSpec x;
    apply_stack(s, x);
    if (s.name == "deepspeed") EXPECT_LT(x.recipe.compute_efficiency, 1.0);
    else EXPECT_EQ(x.recipe.compute_efficiency, 1.0) << s.name;
  }
}
