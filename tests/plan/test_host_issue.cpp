// The host issue floor (plan/host_issue.h): a Python stack's host spends host_launch_us per kernel
// launch, so a micro-batch takes at least its launches x that; CUDA graphs issue a captured scope
// in one launch per pass, full-iteration graphs leave no floor.
#include <gtest/gtest.h>

#include "core/cost_table.h"
#include "plan/estimate.h"
#include "plan/host_issue.h"
#include "plan/kernel_calls.h"
#include "../common/test_run.h"

using namespace trident;
using namespace trident::plan;

namespace {

// Qwen3-30B-A3B's shape: 48 layers of 128 experts of width 768, top-8, hidden 2048.
ModelSpec qwen3_30b_like() {
  ModelSpec m = model_preset("mixtral-8x7b");
  m.layers = 48;
  m.hidden = 2048;
  m.heads = 32;
  m.kv_heads = 4;
  m.experts = 128;
  m.experts_per_token = 8;
  m.expert_ffn_hidden = 768;
  m.ffn_hidden = 6144;
  m.seq_len = 4096;
  return m;
}

// Megatron-Core with Transformer Engine (a Python stack) on `nodes` nodes of `cluster`.
RunSpec megatron_run(const ModelSpec& m, const char* cluster, int64_t nodes, int64_t tp, int64_t pp, int64_t dp,
                     int64_t ep, int64_t mbs, int64_t gbs) {
  RunSpec r = tests::run_on(m, cluster, nodes, tp, pp, dp, "tp-ep-dp-pp");
  r.layout.ep = ep;
  apply_stack(*find_stack("megatron-core-te"), r.exec);
  r.exec.stack = "megatron-core-te";
  r.exec.micro_batch_size = mbs, r.exec.global_batch_size = gbs;
  r.exec.sequence_parallel = tp > 1;
  r.exec.recompute = Recompute::Selective;
  return r;
}

ExecutionSpec python_exec() {
  ExecutionSpec e;
  apply_stack(*find_stack("megatron-core-te"), e);
  e.stack = "megatron-core-te";
  return e;
}

CostTable launches_at(double us) {
  CostTable c;
  c.host_launch_us = us;
  return c;
}

}  // namespace

// Qwen3-30B at micro-batch 1 on 8 B200 (ep 8: 16 local experts, two GEMM launches each per pass)
// issues ~6000 kernels per micro-batch for ~40 ms of GPU work: the host is the floor. GPT-3 175B
// at tp 8 x pp 8 issues fewer per stage for far longer kernels: no floor.
TEST(HostIssue, floor_for_a_small_micro_batch_moe_layout_not_a_large_dense_one) {
  const RunSpec moe = megatron_run(qwen3_30b_like(), "dgx-b200", 1, 1, 1, 8, 8, 1, 64);
  const Estimate em = estimate(moe, 0.0);
  const StageTime& sm = em.stages[0];
  ASSERT_TRUE(sm.host_issue.applies);
  EXPECT_GT(sm.host_issue.host_s, sm.gpu_s());
  EXPECT_NEAR(sm.host_s, sm.host_issue.host_s - sm.gpu_s(), 1e-12);
  EXPECT_NEAR(em.time.host, double(em.micro_batches) * sm.host_s, 1e-12);
  EXPECT_GT(em.time.host, 0.1 * em.time.step);

  const RunSpec dense = megatron_run(model_preset("gpt3-175b"), "dgx-a100-80g", 64, 8, 8, 8, 1, 1, 512);
  const Estimate ed = estimate(dense, 0.0);
  for (const StageTime& st : ed.stages) {
    ASSERT_TRUE(st.host_issue.applies);
    EXPECT_GT(st.host_issue.host_s, 0);
    EXPECT_LT(st.host_issue.host_s, st.gpu_s());
    EXPECT_EQ(st.host_s, 0);
  }
  EXPECT_EQ(ed.time.host, 0);
  // Trident's own runtime issues from C++: no floor under the same MoE layout.
  RunSpec native = moe;
  apply_stack(*find_stack("trident"), native.exec);
  native.exec.stack = "trident";
  EXPECT_EQ(estimate(native, 0.0).time.host, 0);
}

// The host's time is its launches x host_launch_us, the launches counted from the layer's
// scoped kernels: twice the layers, twice the launches; more local experts, two more launches
// per extra expert and pass (forward GEMMs in and out; backward dgrad and wgrad of both).
TEST(HostIssue, floor_scales_with_the_kernel_count) {
  const ModelSpec m = qwen3_30b_like();
  const ExecutionSpec e = python_exec();
  const CostTable c = launches_at(12);
  const KernelCalls k8 = layer_kernel_calls(m, e, 1, 1, 8), k4 = layer_kernel_calls(m, e, 1, 1, 4);
  const HostIssue h = host_issue(e, k8, 10, false, false, 0.0, c);
  EXPECT_EQ(h.forward_launches, 10 * k8.scoped_forward.total());
  EXPECT_EQ(h.backward_launches, 10 * k8.scoped_backward.total());
  EXPECT_NEAR(h.host_s, double(h.launches()) * 12e-6, 1e-15);
  EXPECT_NEAR(h.exposed_s, h.host_s, 1e-15);
  const HostIssue twice = host_issue(e, k8, 20, false, false, 0.0, c);
  EXPECT_EQ(twice.launches(), 2 * h.launches());
  // ep 4 holds 32 experts instead of 16: 16 more experts x (2 forward + 4 backward GEMMs).
  const HostIssue more = host_issue(e, k4, 10, false, false, 0.0, c);
  EXPECT_EQ(more.launches() - h.launches(), 10 * 16 * (2 + 4));
  // The embedding's and the logits' kernels on the first and last stage.
  const HostIssue ends = host_issue(e, k8, 10, true, true, 0.0, c);
  EXPECT_EQ(ends.launches() - h.launches(), kEmbeddingKernels + kLogitsKernels);
  // The GPU's time covers the host's: nothing exposed.
  EXPECT_EQ(host_issue(e, k8, 10, false, false, h.host_s * 1.01, c).exposed_s, 0);
}

// The scoped counts are the same kernels as the per-kind ones, plus the EP all-to-alls the host
// issues (twice in the backward under full recomputation): over dense and MoE, bf16 and fp8, tp, cp, sequence parallel and recompute.
TEST(HostIssue, scoped_kernels_are_the_layer_kernels_plus_the_all_to_alls) {
  for (const ModelSpec& m : {model_preset("llama3-8b"), model_preset("gpt3-1.3b"), qwen3_30b_like()})
    for (Precision p : {Precision::BF16, Precision::FP8})
      for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
        for (int64_t tp : {1, 2})
          for (int64_t cp : {1, 2})
            for (int64_t ep : {1, 8}) {
              ExecutionSpec e = python_exec();
              e.precision = p, e.recompute = rc, e.sequence_parallel = tp > 1;
              const KernelCalls k = layer_kernel_calls(m, e, tp, cp, ep);
              const int64_t a2a = m.is_moe() && ep > 1 ? 2 : 0;
              EXPECT_EQ(k.ep_alltoalls_per_pass, a2a);
              EXPECT_EQ(k.scoped_forward.total(), k.forward.total() + a2a) << m.name;
              // Full recomputation runs the forward's all-to-alls again too.
              const int64_t again = rc == Recompute::Full ? a2a : 0;
              EXPECT_EQ(k.scoped_backward.total(), k.backward.total() + k.recompute.total() + a2a + again) << m.name;
              EXPECT_EQ(k.scoped_forward.mlp > 0, !m.is_moe());
              EXPECT_EQ(k.scoped_forward.moe() > 0, m.is_moe());
            }
}

// A graphed scope costs one launch per pass instead of its kernels; the whole layer (no scope
// named) two per layer; full-iteration leaves no floor at all.
TEST(HostIssue, cuda_graphs_remove_the_graphed_scopes_launches) {
  const ModelSpec m = qwen3_30b_like();
  const CostTable c = launches_at(10);
  ExecutionSpec e = python_exec();
  const KernelCalls k = layer_kernel_calls(m, e, 1, 1, 8);
  const int64_t L = 48;
  const HostIssue none = host_issue(e, k, L, false, false, 0.0, c);
  EXPECT_EQ(none.graphs, 0);

  e.recipe.cuda_graphs = CudaGraphs::TransformerEngine;
  e.recipe.cuda_graph_scopes.attn = true;
  const HostIssue attn = host_issue(e, k, L, false, false, 0.0, c);
  EXPECT_EQ(attn.graphs, 2 * L);
  EXPECT_EQ(attn.graphed, L * (k.scoped_forward.attn + k.scoped_backward.attn));
  EXPECT_EQ(none.launches() - attn.launches(), attn.graphed - attn.graphs);
  EXPECT_EQ(attn.kernels, none.kernels);

  e.recipe.cuda_graph_scopes = {};
  e.recipe.cuda_graph_scopes.moe_router = e.recipe.cuda_graph_scopes.moe_preprocess = true;
  const HostIssue router = host_issue(e, k, L, false, false, 0.0, c);
  EXPECT_EQ(router.graphs, 4 * L);
  EXPECT_EQ(none.launches() - router.launches(),
            L * (k.scoped_forward.moe_router + k.scoped_forward.moe_preprocess + k.scoped_backward.moe_router +
                 k.scoped_backward.moe_preprocess - 4));
  // mlp names the dense MLP: a MoE layer has none, nothing changes.
  e.recipe.cuda_graph_scopes = {};
  e.recipe.cuda_graph_scopes.mlp = true;
  EXPECT_EQ(host_issue(e, k, L, false, false, 0.0, c).launches(), none.launches());

  e.recipe.cuda_graphs = CudaGraphs::Local;
  e.recipe.cuda_graph_scopes = {};
  const HostIssue whole = host_issue(e, k, L, true, true, 0.0, c);
  EXPECT_EQ(whole.launches(), 2 * L + kEmbeddingKernels + kLogitsKernels);

  e.recipe.cuda_graphs = CudaGraphs::FullIteration;
  const HostIssue full = host_issue(e, k, L, false, false, 0.0, c);
  EXPECT_FALSE(full.applies);
  EXPECT_EQ(full.exposed_s, 0);
  EXPECT_EQ(full.host_s, 0);
}

// The estimate carries the graphs: the same MoE layout with the attention and router graphed is
// less host-bound, and full-iteration leaves only the GPU's time.
TEST(HostIssue, estimate_takes_the_graphs_of_the_recipe) {
  RunSpec r = megatron_run(qwen3_30b_like(), "dgx-b200", 1, 1, 1, 8, 8, 1, 64);
  const double none = estimate(r, 0.0).time.host;
  r.exec.recipe.cuda_graphs = CudaGraphs::TransformerEngine;
  r.exec.recipe.cuda_graph_scopes.attn = r.exec.recipe.cuda_graph_scopes.moe_router = true;
  const double some = estimate(r, 0.0).time.host;
  EXPECT_GT(none, some);
  EXPECT_GT(some, 0);
  r.exec.recipe.cuda_graphs = CudaGraphs::FullIteration;
  r.exec.recipe.cuda_graph_scopes = {};
  const Estimate full = estimate(r, 0.0);
  EXPECT_EQ(full.time.host, 0);
  EXPECT_EQ(full.stages[0].total_s(), full.stages[0].gpu_s());
}
