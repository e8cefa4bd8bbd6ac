// Context-parallel and mixture-of-experts terms on hand-computed cases, their lint codes, and
// the search over cp and ep.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "core/units.h"
#include "plan/context_parallel.h"
#include "plan/lint.h"
#include "plan/mixture_of_experts.h"
#include "plan/plan_options.h"
#include "plan/rationale.h"
#include "plan/search.h"
#include "report/plan_report.h"

using namespace trident;
using namespace trident::plan;

namespace {

GroupLink link(LinkKind kind, double bw, double latency, int nodes) {
  GroupLink l;
  l.kind = kind;
  l.bandwidth_Bps = bw;
  l.latency_s = latency;
  l.nodes = nodes;
  return l;
}

ExecutionSpec exec(int64_t micro = 1) {
  ExecutionSpec e;
  e.micro_batch_size = micro;
  e.global_batch_size = 16;
  return e;
}

using KV = std::vector<std::pair<std::string, std::string>>;
LintResult lint(const KV& kv) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options(), plan_options()}));
  for (const auto& [k, x] : kv) v.set(k, x, "--" + k);
  return lint_options(v, kDefaultOverheadGiB * kGiB);
}
void set(KV& kv, const std::string& key, const std::string& value) {
  for (auto& [k, x] : kv)
    if (k == key) {
      x = value;
      return;
    }
  kv.emplace_back(key, value);
}
// What lint refuses the options with (InputError's text), or "" when it takes them.
std::string refusal(const KV& kv) {
  try {
    lint(kv);
  } catch (const InputError& e) {
    std::string all;
    for (const auto& p : e.problems()) all += p.what + " [" + p.code + "]\n";
    return all;
  }
  return "";
}
const Finding* find(const LintResult& r, const std::string& code) {
  for (const auto& f : r.findings)
    if (f.code == code) return &f;
  return nullptr;
}

}  // namespace

// Llama 3 405B at 131,072 tokens, cp 16, tp 8: 8192 tokens per rank, one KV head of 128 per
// GPU (8 KV heads over tp 8): 8192 x 2 x 128 x 2 bytes.
TEST(ContextParallel, kv_block_and_ring_buffers_by_hand) {
  ModelSpec m = model_preset("llama3-405b");
  m.seq_len = 131072;
  EXPECT_DOUBLE_EQ(kv_block_bytes(m, exec(), 8, 16), 8192.0 * 2 * 128 * 2);
  EXPECT_DOUBLE_EQ(cp_ring_buffer_bytes(m, exec(), 8, 16), 4 * 8192.0 * 2 * 128 * 2);
  EXPECT_DOUBLE_EQ(cp_ring_buffer_bytes(m, exec(), 8, 1), 0);
  // tp 16 > 8 KV heads: each GPU keeps one head, replicated.
  EXPECT_DOUBLE_EQ(kv_block_bytes(m, exec(), 16, 16), 8192.0 * 2 * 128 * 2);
}

TEST(ContextParallel, ring_exchange_hides_behind_block_attention_and_shows_the_excess) {
  ModelSpec m = model_preset("llama3-405b");
  m.seq_len = 131072;
  const CostConstants& c = default_constants();
  const GroupLink ib = link(LinkKind::InfiniBand, 50e9, 5e-6, 16);
  const double xfer = 5e-6 + 8192.0 * 2 * 128 * 2 / (50e9 * c.network_efficiency);
  const CpComm slow = cp_comm_per_layer(m, exec(), 8, 16, ib, xfer / 4, xfer / 2, c);
  EXPECT_NEAR(slow.block_transfer_s, xfer, 1e-15);
  EXPECT_EQ(slow.steps, 15);
  EXPECT_NEAR(slow.forward_total_s, 15 * xfer, 1e-12);
  EXPECT_NEAR(slow.forward_exposed_s, 15 * (xfer - xfer / 4), 1e-12);
  // Backward: KV and its gradient (2 transfers) behind the block's backward attention.
  EXPECT_NEAR(slow.backward_exposed_s, 15 * (2 * xfer - xfer / 2), 1e-12);
  EXPECT_NEAR(cp_comm_per_layer(m, exec(), 8, 16, ib, xfer / 4, xfer, c).backward_exposed_s, 15 * xfer, 1e-12);
  // Attention longer than a transfer hides it completely.
  EXPECT_DOUBLE_EQ(cp_comm_per_layer(m, exec(), 8, 16, ib, 2 * xfer, 4 * xfer, c).forward_exposed_s, 0);
  EXPECT_DOUBLE_EQ(cp_comm_per_layer(m, exec(), 8, 16, ib, 2 * xfer, 4 * xfer, c).backward_exposed_s, 0);
  // Full recomputation runs the forward ring again in backward.
  ExecutionSpec full = exec();
  full.recompute = Recompute::Full;
  EXPECT_NEAR(cp_comm_per_layer(m, full, 8, 16, ib, xfer / 4, xfer / 2, c).backward_exposed_s,
              slow.backward_exposed_s + slow.forward_exposed_s, 1e-12);
}

// cp divides every per-token term by cp; attention runs as cp blocks of (s/cp)^2, so its
// FLOPs are the full s^2 ones over cp too.
TEST(ContextParallel, compute_and_activations_are_divided_by_cp) {
  ModelSpec m = model_preset("llama3-8b");
  m.seq_len = 32768;
  ExecutionSpec e = exec();
  e.recompute = Recompute::Selective;  // linear terms only
  const GpuSpec gpu = gpu_preset("h100-80g");
  const CostConstants& c = default_constants();
  const LayerCompute whole = layer_compute(m, e, 1, gpu, c);
  const LayerCompute split = layer_compute(m, e, 1, gpu, c, 4);
  EXPECT_EQ(split.tokens, 32768 / 4);
  EXPECT_NEAR(split.gemm_flops, whole.gemm_flops / 4, 1e-6 * whole.gemm_flops);
  EXPECT_NEAR(split.attention_flops, whole.attention_flops / 4, 1e-6 * whole.attention_flops);
  EXPECT_NEAR(split.attention_s, 4 * split.block_attention_s, 1e-15);
  EXPECT_NEAR(split.attention_backward_s, 4 * split.block_attention_backward_s, 1e-15);
  const double full_bytes = layer_activations(m, e, 1).bytes;
  EXPECT_NEAR(layer_activations(per_rank_sequence(m, 4), e, 1).bytes, full_bytes / 4, 1e-6 * full_bytes);
  // Stage memory: activations / cp plus the ring buffers; ZeRO shards the states over dp x cp.
  e.zero = 1;
  const auto one = stage_memory(m, e, {1, 1, 8, 0, 1, 1});
  const auto four = stage_memory(m, e, {1, 1, 2, 0, 4, 1});
  EXPECT_NEAR(four[0].optimizer_bytes, one[0].optimizer_bytes, 1);  // 8 x 1 and 2 x 4 data ranks
  EXPECT_DOUBLE_EQ(four[0].cp_ring_buffer_bytes, cp_ring_buffer_bytes(m, e, 1, 4));
}

TEST(MixtureOfExperts, alltoall_and_dispatch_volume_by_hand) {
  const CostConstants& c = default_constants();
  const GroupLink nv = link(LinkKind::NVLink, 450e9, 3e-6, 1);
  EXPECT_NEAR(alltoall_time_s(8e6, 8, nv, c), 7 * 3e-6 + 7.0 / 8 * 8e6 / (450e9 * c.nvlink_efficiency), 1e-15);
  EXPECT_DOUBLE_EQ(alltoall_time_s(8e6, 1, nv, c), 0);
  // A measured all-to-all share (trident bench's alltoall_efficiency) replaces the link's.
  CostConstants measured = c;
  measured.alltoall_efficiency = 1.3;
  EXPECT_DOUBLE_EQ(alltoall_efficiency(nv, measured), 1.3);
  EXPECT_DOUBLE_EQ(alltoall_efficiency(nv, c), c.nvlink_efficiency);
  EXPECT_NEAR(alltoall_time_s(8e6, 8, nv, measured), 7 * 3e-6 + 7.0 / 8 * 8e6 / (450e9 * 1.3), 1e-15);
  // A measured per-peer call cost (trident bench's alltoall_latency_us) replaces the link's latency.
  measured.alltoall_latency_us = 15;
  EXPECT_DOUBLE_EQ(alltoall_latency_s(nv, measured), 15e-6);
  EXPECT_DOUBLE_EQ(alltoall_latency_s(nv, c), 3e-6);
  EXPECT_NEAR(alltoall_time_s(8e6, 8, nv, measured), 7 * 15e-6 + 7.0 / 8 * 8e6 / (450e9 * 1.3), 1e-15);
  EXPECT_NEAR(alltoall_time_s(32, 2, nv, measured), 15e-6 + 16 / (450e9 * 1.3), 1e-15);
  // ... but never below the link's own latency (a link to another host).
  measured.alltoall_latency_us = 1;
  EXPECT_DOUBLE_EQ(alltoall_latency_s(nv, measured), 3e-6);
  // Mixtral 8x22B, one sequence of 4096, ep 8: every tp rank routes the whole micro-batch and
  // dispatches all of it (the runtime's experts are whole on each tp rank), whatever tp is:
  // 4096 tokens x top-2 x h 6144 x 2 bytes, unpadded: the capacity factor does not enter.
  ModelSpec m = model_preset("mixtral-8x22b");
  m.seq_len = 4096;
  m.capacity_factor = 1.25;
  const EpComm ec = ep_comm_per_layer(m, exec(), 8, nv, c);
  EXPECT_DOUBLE_EQ(ec.message_bytes, 4096.0 * 2 * 6144 * 2);
  EXPECT_EQ(ec.forward_alltoalls, 2);
  // Before the dispatch, the 8 experts' row counts (int32) go round: one latency-bound all-to-all.
  EXPECT_EQ(ec.forward_count_exchanges, 1);
  EXPECT_NEAR(ec.count_exchange_s, alltoall_time_s(8 * 4, 8, nv, c), 1e-15);
  EXPECT_GT(ec.count_exchange_s, 7 * nv.latency_s);
  EXPECT_NEAR(ec.forward_s, 2 * alltoall_time_s(ec.message_bytes, 8, nv, c) + ec.count_exchange_s, 1e-15);
  // Full recompute runs the forward again: its dispatch, combine and count exchange.
  ExecutionSpec full = exec();
  full.recompute = Recompute::Full;
  const EpComm er = ep_comm_per_layer(m, full, 8, nv, c);
  EXPECT_EQ(er.backward_alltoalls, 4);
  EXPECT_EQ(er.backward_count_exchanges, 1);
  EXPECT_NEAR(er.backward_s, 4 * er.alltoall_s + er.count_exchange_s, 1e-15);
  EXPECT_DOUBLE_EQ(ep_comm_per_layer(m, exec(), 1, nv, c).forward_s, 0);  // no ep: no all-to-all
}

// FLOPs count the active parameters: Mixtral 8x7B's matrices per token are attention, two of
// the eight SwiGLU experts and the router.
TEST(MixtureOfExperts, model_flops_count_active_parameters) {
  const ModelSpec m = model_preset("mixtral-8x7b");
  const double s = double(m.seq_len), h = 4096;
  const double matrices = h * (h + 2 * 1024) + h * h + 2.0 * 3 * h * 14336 + h * 8;
  const double expected = 3 * 2 * (32 * (2 * s * matrices + 4 * s * s * h) + 2 * s * h * 32000);
  EXPECT_NEAR(model_flops_per_step(m, 2, 32000), expected, 1e-9 * expected);
  // The layer's GEMM FLOPs on one GPU: k experts per token, whatever ep is.
  const GpuSpec gpu = gpu_preset("h100-80g");
  const LayerCompute one = layer_compute(m, exec(), 1, gpu, default_constants(), 1, 1);
  const LayerCompute eight = layer_compute(m, exec(), 1, gpu, default_constants(), 1, 8);
  EXPECT_NEAR(one.gemm_flops, eight.gemm_flops, 1e-9 * one.gemm_flops);
  const double T = s;
  EXPECT_NEAR(one.gemm_flops, 2 * T * (h * (h + 2 * 1024) + h * h + 2.0 * 3 * h * 14336 + h * 8), 1e-9 * one.gemm_flops);
  // A capacity factor above 1 bounds the drops, not the work: unpadded, the experts' GEMMs run on
  // the rows routed to them (balanced: T k ep / E per local expert).
  ModelSpec bounded = m;
  bounded.capacity_factor = 1.5;
  const LayerCompute same = layer_compute(bounded, exec(), 1, gpu, default_constants(), 1, 8);
  EXPECT_DOUBLE_EQ(same.gemm_s, eight.gemm_s);
  EXPECT_NEAR(same.gemm_flops, eight.gemm_flops, 1e-9 * one.gemm_flops);
  EXPECT_DOUBLE_EQ(moe_compute(m, T, 1, 8, 1e15, 1, default_constants()).tokens_per_expert, T * 2 * 8 / 8);
}

// Mixtral 8x7B, tp 1, ep 8, all 32 layers on one stage: one expert of 176,160,768 per layer and
// GPU; ZeRO 1 shards the experts' optimizer states over dp x cp / ep.
TEST(MixtureOfExperts, dense_and_expert_memory_are_separate) {
  const ModelSpec m = model_preset("mixtral-8x7b");
  const StageParams p = stage_params(m, 1, 1, 32, true, true, 8);
  EXPECT_DOUBLE_EQ(p.expert_params, 32.0 * 176160768);
  const ParamCount pc = count_parameters(m);
  EXPECT_DOUBLE_EQ(p.layer_params, 32.0 * (pc.attention_per_layer + pc.norms_per_layer + pc.router_per_layer));
  ExecutionSpec e = exec();
  e.zero = 1;
  e.global_batch_size = 64;
  const auto mem = stage_memory(m, e, {1, 1, 16, 0, 1, 8});
  const StateBytes sb = state_bytes(e.precision, e.grad_bits);
  const double edp = 16.0 / 8;
  EXPECT_NEAR(mem[0].expert_state_bytes, p.expert_params * (sb.weights + sb.gradients + sb.optimizer / edp), 1);
  EXPECT_NEAR(mem[0].optimizer_bytes, p.dense() * sb.optimizer / 16 + p.expert_params * sb.optimizer / edp, 1);
}

// The experts as Megatron-Core lays them out (core/mesh.h's expert grid): each tp rank routes
// its own T / tp tokens, so the routed work is done once, not on every tp rank, whatever etp is;
// etp splits each expert's weights and widths. Mixtral 8x7B, ep 4: 2 experts of
// 3 x 4096 x 14336 = 176,160,768 per layer. (The old model kept experts whole on every tp rank
// and ran them on the whole micro-batch there: tp times the routed FLOPs and activations.)
TEST(MixtureOfExperts, experts_fold_over_tp_and_split_over_etp) {
  const ModelSpec m = model_preset("mixtral-8x7b");
  const MoeParams one = moe_params_per_layer(m, 1, 4), two = moe_params_per_layer(m, 2, 4);
  EXPECT_DOUBLE_EQ(one.experts, 2.0 * 3 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(two.experts, one.experts);  // etp 1: whole experts at any tp
  EXPECT_DOUBLE_EQ(moe_params_per_layer(m, 2, 4, 2).experts, one.experts / 2);  // etp 2 halves them
  EXPECT_LT(two.dense, one.dense);
  EXPECT_DOUBLE_EQ(stage_params(m, 2, 1, 32, true, true, 4, 2).expert_params,
                   stage_params(m, 1, 1, 32, true, true, 4).expert_params / 2);
  // Routed work per GPU at tp t: the model's / t. tp 4 folded (etp 1) and split (etp 4) alike:
  // T k ep etp / (tp E) rows per local expert at width fe / etp.
  const GpuSpec gpu = gpu_preset("h100-80g");
  const CostConstants& c = default_constants();
  const double T = 4096, routed = 2 * T * 2 * 4096 * 3 * 14336;  // 2 T k h (2 + 1) fe
  const MoeCompute c1 = moe_compute(m, T, 1, 4, gpu.bf16_flops, c.gemm_peak_efficiency, c);
  const MoeCompute fold = moe_compute(m, T, 4, 4, gpu.bf16_flops, c.gemm_peak_efficiency, c, 1);
  const MoeCompute split = moe_compute(m, T, 4, 4, gpu.bf16_flops, c.gemm_peak_efficiency, c, 4);
  EXPECT_DOUBLE_EQ(c1.routed_flops, routed);
  EXPECT_DOUBLE_EQ(fold.routed_flops, routed / 4);
  EXPECT_DOUBLE_EQ(split.routed_flops, routed / 4);
  EXPECT_DOUBLE_EQ(c1.tokens_per_expert, T * 2 * 4 / 8);
  EXPECT_DOUBLE_EQ(fold.tokens_per_expert, T / 4 * 2 * 4 / 8);
  EXPECT_DOUBLE_EQ(split.tokens_per_expert, T * 2 * 4 / 8);
  // Time follows the FLOPs while the GEMMs stay large (1024 rows per expert at tp 4).
  EXPECT_NEAR(fold.routed_s, c1.routed_s / 4, 0.1 * c1.routed_s / 4);
  EXPECT_DOUBLE_EQ(fold.router_flops, c1.router_flops / 4);
  // The dispatch carries each tp rank's own tokens: tp 4 sends a quarter; etp 4 adds the etp
  // group's ring all-gather of the rows received (etp x the message, on the etp link).
  const GroupLink nv = link(LinkKind::NVLink, 450e9, 3e-6, 1);
  const EpComm e1 = ep_comm_per_layer(m, exec(), 4, nv, c), e4 = ep_comm_per_layer(m, exec(), 4, nv, c, 4, 1);
  EXPECT_DOUBLE_EQ(e4.message_bytes, e1.message_bytes / 4);
  EXPECT_DOUBLE_EQ(e4.etp_gather_s, 0);
  const EpComm es = ep_comm_per_layer(m, exec(), 4, nv, c, 4, 4, nv);
  EXPECT_DOUBLE_EQ(es.etp_gather_bytes, 4 * es.message_bytes);
  EXPECT_NEAR(es.etp_gather_s, ring_allgather_time_s(4 * es.message_bytes, 4, nv, c), 1e-15);
  EXPECT_NEAR(es.forward_s, 2 * (es.alltoall_s + es.etp_gather_s) + es.count_exchange_s, 1e-15);
  // Activations: the routed experts' are per GPU too, so under sequence parallel tp 2 halves
  // the whole layer (the old model kept them whole on each tp rank).
  ExecutionSpec e = exec();
  e.precision = Precision::BF16;
  e.sequence_parallel = true;
  e.recompute = Recompute::Selective;
  const double a1 = layer_activations(m, e, 1).bytes, a2 = layer_activations(m, e, 2).bytes;
  EXPECT_NEAR(a2, a1 / 2, 1e-9 * a1);
  const MoeActivationElements x1 = moe_mlp_activation_elements(m, RecipeSettings{}, double(m.seq_len));
  const MoeActivationElements x2 = moe_mlp_activation_elements(m, RecipeSettings{}, double(m.seq_len), 2, 2);
  // etp 2 at tp 2: the MLP width halves, the gathered permuted rows do not.
  EXPECT_NEAR(x2.whole, x1.whole / 2 + 0.5 * 2 * double(m.seq_len) * 4096 * 2 * m.capacity_factor, 1e-6 * x1.whole);
  // ZeRO 1 shards the expert optimizer states over the expert grid's edp: tp 2 x dp 8 / (ep 4 x etp 1) = 4.
  ExecutionSpec z = exec();
  z.zero = 1;
  z.global_batch_size = 64;
  const auto mem = stage_memory(m, z, {2, 1, 8, 0, 1, 4, 1});
  const StateBytes sb = state_bytes(z.precision, z.grad_bits);
  EXPECT_NEAR(mem[0].expert_state_bytes, mem[0].params.expert_params * (sb.weights + sb.gradients + sb.optimizer / 4), 1);
}

// A Grok-1-like model (8 experts of width 32768, top-2, hidden 6144) at tp 4 on H100: the layer's
// GEMM time falls by the routed experts' share x 3/4 against the same experts run on every tp
// rank (tp 1's routed time), as the formula says: routed(tp 4) = routed(tp 1) / 4.
TEST(MixtureOfExperts, a_grok_like_layer_at_tp_4_runs_its_experts_once) {
  ModelSpec m = model_preset("mixtral-8x22b");
  m.hidden = 6144, m.heads = 48, m.kv_heads = 8, m.experts = 8, m.experts_per_token = 2;
  m.expert_ffn_hidden = m.ffn_hidden = 32768, m.layers = 64, m.seq_len = 8192;
  const GpuSpec gpu = gpu_preset("h100-80g");
  const CostConstants& c = default_constants();
  const double T = 8192;
  const MoeCompute at1 = moe_compute(m, T, 1, 8, gpu.bf16_flops, c.gemm_peak_efficiency, c);
  const MoeCompute at4 = moe_compute(m, T, 4, 8, gpu.bf16_flops, c.gemm_peak_efficiency, c);
  const LayerCompute lc = layer_compute(m, exec(), 4, gpu, c, 1, 8);
  // What the layer would take with every tp rank running the experts on the whole micro-batch.
  const double replicated_gemm_s = lc.gemm_s - at4.routed_s + at1.routed_s;
  EXPECT_NEAR(at4.routed_s, at1.routed_s / 4, 0.05 * at1.routed_s / 4);
  EXPECT_GT(replicated_gemm_s / lc.gemm_s, 2.0);  // the experts dominate a Grok-1 layer
}

TEST(LintContextExpert, cp_on_the_network_and_ep_across_nodes_warn) {
  const KV l405 = {{"model", "llama3-405b"}, {"seq-len", "131072"}, {"cluster", "dgx-h100"}, {"nodes", "2048"},
                   {"tp", "8"},     {"cp", "16"},     {"pp", "16"},     {"global-batch-size", "256"},
                   {"micro-batch-size", "1"}, {"recompute", "full"}, {"sequence-parallel", "true"},
                   {"zero", "1"}, {"schedule", "1f1b"}};
  const LintResult r = lint(l405);
  const Finding* cp = find(r, "cp-crosses-domain");
  ASSERT_NE(cp, nullptr);
  EXPECT_NE(cp->message.find("tp 8 x cp 16 = 128 GPUs exceed the 8 GPUs"), std::string::npos) << cp->message;
  // 8192 tokens per rank hide the ring behind attention: said, not warned. At 512 per rank
  // (seq 8192) the blocks are too small and the exposed part is a warning.
  EXPECT_EQ(cp->severity, Severity::Info) << cp->message;
  KV short_seq = l405;
  for (auto& [k, v] : short_seq)
    if (k == "seq-len") v = "8192";
  const LintResult rs = lint(short_seq);
  const Finding* cps = find(rs, "cp-crosses-domain");
  ASSERT_NE(cps, nullptr);
  EXPECT_EQ(cps->severity, Severity::Warning) << cps->message;
  EXPECT_GT(rs.estimate->time.cp_comm, 0.01 * rs.estimate->time.step);
  const KV mix = {{"model", "mixtral-8x22b"}, {"seq-len", "4096"}, {"cluster", "dgx-h100"}, {"nodes", "8"},
                  {"tp", "2"},     {"pp", "4"},     {"ep", "8"},     {"etp", "2"},  // ep groups inside a tp rank
                  {"global-batch-size", "256"},
                  {"micro-batch-size", "1"}, {"recompute", "full"}, {"sequence-parallel", "true"},
                  {"zero", "1"}, {"schedule", "1f1b"}};
  const LintResult wide = lint(mix);
  ASSERT_NE(find(wide, "ep-alltoall-slow"), nullptr);
  KV inside = mix;
  for (auto& [k, v] : inside)
    if (k == "ep") v = "4";
  EXPECT_EQ(find(lint(inside), "ep-alltoall-slow"), nullptr);  // tp 2 x ep 4 = one node
}

TEST(LintContextExpert, shape_errors_for_cp_and_ep_are_error_findings) {
  const LintResult r = lint({{"model", "mixtral-8x7b"}, {"cluster", "dgx-h100"}, {"nodes", "3"}, {"ep", "3"},
                             {"seq-len", "4100"}, {"cp", "4"}, {"global-batch-size", "6"}});
  const Finding* ep = find(r, "ep-divides-experts");
  ASSERT_NE(ep, nullptr);
  EXPECT_EQ(ep->severity, Severity::Error);
  EXPECT_NE(find(r, "cp-divides-sequence"), nullptr);
}

// The NVLink rule follows the domain: tp 16 inside a GB200 NVL72 rack is fine, across two DGX
// H100 hosts it is an error.
TEST(LintContextExpert, tp_16_is_fine_inside_an_nvl72_rack_and_not_across_dgx_hosts) {
  const KV base = {{"model", "llama3-405b"}, {"tp", "16"}, {"pp", "9"}, {"global-batch-size", "128"},
                   {"micro-batch-size", "1"}, {"recompute", "full"}, {"sequence-parallel", "true"},
                   {"zero", "1"}, {"schedule", "1f1b"}};
  KV rack = base;
  rack.insert(rack.end(), {{"cluster", "gb200-nvl72"}, {"nodes", "36"}, {"order", "tp-pp-dp"}});
  const LintResult in_rack = lint(rack);
  // pp 9 x tp 16 = 144 GPUs = 2 racks; with tp-pp-dp each tp group is 16 consecutive GPUs, and
  // 72 = 4.5 x 16, so the 5th group straddles the two racks: only it is flagged.
  const Finding* f = find(in_rack, "tp-crosses-nodes");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("1 of 9 TP groups leave their NVLink domain"), std::string::npos) << f->message;
  KV dgx = base;
  dgx.insert(dgx.end(), {{"cluster", "dgx-h100"}, {"nodes", "18"}, {"order", "tp-pp-dp"}});
  const auto dgx_result = lint(dgx);  // kept: the finding points into it
  const Finding* g = find(dgx_result, "tp-crosses-nodes");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->message.find("9 of 9 TP groups leave their node"), std::string::npos) << g->message;
  KV tp8 = rack;
  for (auto& [k, v] : tp8)
    if (k == "tp") v = "8";
  for (auto& [k, v] : tp8)
    if (k == "nodes") v = "18";  // 8 x 9 = 72: one rack, tp 8 = 2 hosts on NVLink
  EXPECT_EQ(find(lint(tp8), "tp-crosses-nodes"), nullptr);
}

TEST(SearchContextExpert, search_covers_cp_and_ep) {
  ClusterSpec cl = cluster_preset("dgx-h100");
  cl.nodes = 8;
  SearchSpace space;
  space.size(Dim::EP) = 8;
  const SearchResult moe = search(model_preset("mixtral-8x7b"), cl, 128, space, 3, kDefaultOverheadGiB * kGiB);
  ASSERT_FALSE(moe.best.empty());
  for (const auto& e : moe.best) EXPECT_EQ(e.run.layout.ep, 8);
  ModelSpec longseq = model_preset("llama3-8b");
  longseq.seq_len = 65536;
  SearchSpace any;
  const SearchResult r = search(longseq, cl, 16, any, 50, kDefaultOverheadGiB * kGiB);
  bool has_cp = false;
  for (const auto& e : r.best) has_cp = has_cp || e.run.layout.cp > 1;
  EXPECT_TRUE(has_cp) << "no cp > 1 among the best 50 at 65,536 tokens";
}

// The report prints each new term with the inputs it was computed from, and its total is the
// per-layer term x layers x micro-batches.
TEST(ReportContextExpert, text_shows_the_ep_and_cp_terms_with_their_inputs) {
  const KV mix = {{"model", "mixtral-8x22b"}, {"seq-len", "4096"}, {"capacity-factor", "1.25"},
                  {"cluster", "dgx-h100"}, {"nodes", "8"}, {"tp", "4"}, {"pp", "4"}, {"dp", "4"}, {"ep", "2"},
                  {"global-batch-size", "256"}, {"micro-batch-size", "1"}, {"sequence-parallel", "true"},
                  {"zero", "1"}, {"schedule", "1f1b"}};
  const LintResult r = lint(mix);
  ASSERT_TRUE(r.estimate);
  const Estimate& e = *r.estimate;
  const std::string text = estimate_text(e, false);
  // 4096 / tp 4 = 1024 tokens (each tp rank its own) x 2 x 6144 x 2 B = 24 MiB.
  EXPECT_NE(text.find("each GPU sends 24.00 MiB (1024 tokens of b x s/cp / tp, its own share, "
                      "x top-2 x hidden 6144 x 2 B, unpadded"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(4 of 8 experts per GPU, ep 2, whole: etp 1), states sharded over edp 8 (tp x cp x dp / (ep x etp))"),
            std::string::npos) << text;
  // 4 all-to-alls of the rows and the count exchange before the forward's dispatch, 14 layers x 64.
  EXPECT_NEAR(e.time.ep_comm, (4 * e.ep_alltoall.alltoall_s + e.ep_alltoall.count_exchange_s) * 14 * 64,
              1e-9 * e.time.ep_comm);
  EXPECT_NE(text.find("and 1 + 0 exchanges of the 8 experts' row counts before a dispatch (all-to-all of 8 x 4 B: "),
            std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("= {:.3f} s\n", e.time.ep_comm)), std::string::npos) << text;
  // Experts: 4 of 8 per GPU (ep 2), whole (etp 1), 14 layers: 56 x 3 x 6144 x 16384 = 16.911 B;
  // their states over the expert grid's edp = tp 4 x dp 4 / ep 2 = 8 (it was dp / ep = 2).
  EXPECT_NE(text.find("0.359 B dense x 12 B / dp 4 + 16.911 B expert x 12 B / edp 8"), std::string::npos) << text;

  const KV l405 = {{"model", "llama3-405b"}, {"seq-len", "131072"}, {"cluster", "dgx-h100"}, {"nodes", "2048"},
                   {"tp", "8"}, {"cp", "16"}, {"pp", "16"}, {"global-batch-size", "128"}, {"micro-batch-size", "1"},
                   {"recompute", "full"}, {"sequence-parallel", "true"}, {"zero", "1"}, {"schedule", "1f1b"}};
  const LintResult c = lint(l405);
  ASSERT_TRUE(c.estimate);
  const std::string ct = estimate_text(*c.estimate, false);
  EXPECT_NE(ct.find("15 steps, each a KV block of 4.00 MiB (b 1 x s/cp 8192 x K,V 2 x kv dim 1024 / 8 x 2 B)"),
            std::string::npos) << ct;
  const CpComm& ring = c.estimate->cp_ring;
  EXPECT_NEAR(c.estimate->time.cp_comm, (ring.forward_exposed_s + ring.backward_exposed_s) * 8 * 16,
              1e-12 + 1e-9 * c.estimate->time.cp_comm);
}

// The decision flow says where cp and ep enter, in the chapter's step form, with the numbers.
// --moe-load-imbalance x: the most loaded ep rank's experts take x times the mean rows, so the
// other ranks wait (x - 1) x the experts' balanced forward GEMMs before the combine, twice that
// backward (input- and weight-gradient GEMMs) and once more under full recomputation; and its
// all-to-alls move x times the balanced wire bytes. Balanced (x = 1), at ep 1, or in a dense
// model, nothing changes; outside [1, experts] it is refused, naming the flag.
TEST(MixtureOfExperts, load_imbalance_makes_the_other_ranks_wait_by_hand) {
  KV mix = {{"model", "mixtral-8x22b"}, {"seq-len", "4096"}, {"cluster", "dgx-h100"}, {"nodes", "8"}, {"tp", "4"},
            {"pp", "4"}, {"dp", "4"}, {"ep", "2"}, {"global-batch-size", "256"}, {"micro-batch-size", "1"},
            {"zero", "1"}, {"schedule", "1f1b"}, {"recompute", "full"}};
  const LintResult even = lint(mix);
  set(mix, "moe-load-imbalance", "1.25");
  const LintResult loaded = lint(mix);
  ASSERT_TRUE(even.estimate && loaded.estimate);
  const Estimate &a = *even.estimate, &b = *loaded.estimate;
  EXPECT_EQ(a.time.ep_wait, 0.0);
  const LayerCompute lc = layer_compute(b.run.model, b.run.exec, 4, b.run.cluster.gpu, b.cost, 1, 2);
  ASSERT_GT(lc.moe_routed_s, 0.0);
  // Every layer is a MoE layer: 0.25 x routed GEMMs x (1 forward + 2 backward + 1 recomputed).
  EXPECT_NEAR(b.ep_wait.forward_s, 0.25 * lc.moe_routed_s, 1e-12);
  EXPECT_NEAR(b.ep_wait.backward_s, 0.25 * lc.moe_routed_s * 3, 1e-12);
  EXPECT_NEAR(b.time.ep_wait, 0.25 * lc.moe_routed_s * 4 * 14 * 64, 1e-9 * b.time.ep_wait);
  // The wire part of each all-to-all (its time less the per-peer latency) grows by 1.25.
  const double lat = alltoall_latency_s(b.links.ep.link, b.cost);
  EXPECT_NEAR(b.ep_alltoall.alltoall_s - lat, 1.25 * (a.ep_alltoall.alltoall_s - lat), 1e-12);
  EXPECT_EQ(b.ep_alltoall.count_exchange_s, a.ep_alltoall.count_exchange_s);
  // The step carries both: the slowest stage's extra time, m times, plus the bubble's share.
  EXPECT_GT(b.time.step - a.time.step, b.time.ep_wait + (b.time.ep_comm - a.time.ep_comm) - 1e-9);
  const std::string text = estimate_text(b, false);
  EXPECT_NE(text.find(fmt::format(" + EP wait {:.3f} (", b.time.ep_wait)), std::string::npos) << text;
  EXPECT_NE(text.find("the most loaded ep rank's experts take 1.25 x the mean rows"), std::string::npos) << text;
  EXPECT_NE(text.find("1/2 of it x 1.25 (the most loaded rank's rows, --moe-load-imbalance)"), std::string::npos) << text;

  set(mix, "ep", "1");  // one rank holds every expert: its load is the whole batch's, whatever the routing
  const LintResult one = lint(mix);
  ASSERT_TRUE(one.estimate);
  EXPECT_EQ(one.estimate->time.ep_wait, 0.0);

  for (const char* bad : {"0.9", "9"}) {  // below balance; above the 8 experts
    set(mix, "moe-load-imbalance", bad);
    const std::string why = refusal(mix);
    EXPECT_NE(why.find("--moe-load-imbalance"), std::string::npos) << bad << ": " << why;
  }
  const std::string why = refusal({{"model", "gpt3-1.3b"}, {"cluster", "dgx-a100-80g"}, {"nodes", "1"},
                                   {"moe-load-imbalance", "1.2"}});
  EXPECT_NE(why.find("moe-settings-on-dense"), std::string::npos) << why;
}

TEST(RationaleContextExpert, steps_5_and_6_say_where_cp_and_ep_enter) {
  ClusterSpec cl = cluster_preset("dgx-h100");
  cl.nodes = 8;
  SearchSpace space;
  space.settings.attention = AttentionKind::Flash;
  ModelSpec mix = model_preset("mixtral-8x7b");
  mix.seq_len = 4096;
  const SearchResult moe = search(mix, cl, 128, space, 1, kDefaultOverheadGiB * kGiB);
  ASSERT_FALSE(moe.best.empty());
  const auto why = rationale(mix, cl, 128, space, moe.best.front(), kDefaultOverheadGiB * kGiB);
  auto step = [&](const std::vector<std::string>& w, const std::string& head) -> std::string {
    for (const auto& s : w)
      if (s.rfind(head, 0) == 0) return s;
    return "";
  };
  const std::string ep = step(why, "6. Mixture of experts: add EP?");
  ASSERT_FALSE(ep.empty()) << fmt::format("{}", fmt::join(why, "\n"));
  EXPECT_NE(ep.find("8 experts (top-2)"), std::string::npos) << ep;
  EXPECT_NE(ep.find(moe.best.front().run.layout.ep > 1 ? "Yes: ep" : "No: that fits"), std::string::npos) << ep;
  EXPECT_NE(step(why, "5. Long sequences: add CP?").find(": no, the activations fit with cp 1"), std::string::npos);

  // 131,072 tokens of Llama 3 8B on 64 GPUs, 16 sequences: cp wins over the best layout without it.
  ModelSpec longseq = model_preset("llama3-8b");
  longseq.seq_len = 131072;
  const SearchResult r = search(longseq, cl, 16, space, 1, kDefaultOverheadGiB * kGiB);
  ASSERT_FALSE(r.best.empty());
  ASSERT_GT(r.best.front().run.layout.cp, 1);
  const auto why_cp = rationale(longseq, cl, 16, space, r.best.front(), kDefaultOverheadGiB * kGiB);
  const std::string cp = step(why_cp, "5. Long sequences: add CP?");
  EXPECT_NE(cp.find(fmt::format("cp {} gives each rank {} of them", r.best.front().run.layout.cp,
                                131072 / r.best.front().run.layout.cp)),
            std::string::npos) << cp;
  EXPECT_NE(cp.find("Without cp the best layout is"), std::string::npos) << cp;
  EXPECT_TRUE(step(why_cp, "6.").empty());  // a dense model has no EP step
}
