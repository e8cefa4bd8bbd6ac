// Kernel calls of one transformer layer for one micro-batch on one GPU, counted from the layer's
// structure, so the fixed cost of each call (CostTable::kernel_launch_us: launch, the framework's
// dispatch and the kernel's ramp and tail) is a term of its own: on small models at high tp the
// kernels are short and these fixed costs are a large share of the step.
#pragma once

#include <cstdint>
#include <string>

#include "core/execution_spec.h"
#include "core/model_spec.h"

namespace trident::plan {

// One pass of one layer, by kind of kernel (what the report prints, so the count is checkable).
struct KernelPass {
  int64_t gemms = 0;        // weight GEMMs (backward: dgrad and wgrad each)
  int64_t attention = 0;    // the core attention: fused kernels, or the unfused GEMMs, softmax, dropout
  int64_t elementwise = 0;  // norms, activation, bias-dropout-add, rotary embedding, MoE permutes
  int64_t collectives = 0;  // TP and CP communication kernels (NCCL launches one per collective)
  int64_t casts = 0;        // FP8 quantisation of GEMM inputs
  int64_t total() const { return gemms + attention + elementwise + collectives + casts; }
  std::string describe() const;  // "4 GEMMs + 1 attention + 5 elementwise + 4 collectives"
};

// A layer's kernels of one pass by the part of the layer a per-layer CUDA graph can capture
// (core/execution_spec.h CudaGraphScopes): the attention block (its norm, QKV, rotary, core
// attention, projection, residual add, their TP / CP collectives and casts), the dense MLP block,
// a MoE layer's router (the norm before it, the router's GEMM, score function and top-k), the
// dispatcher's preprocessing (the permute) and the rest of the MoE block (experts, activation,
// unpermute, residual add, shared experts, TP collectives and casts, and the dispatch and combine
// all-to-alls, which KernelPass leaves to the EP term: the host issues them all the same).
struct ScopedKernels {
  int64_t attn = 0, mlp = 0, moe_router = 0, moe_preprocess = 0, moe_rest = 0;
  int64_t total() const { return attn + mlp + moe_router + moe_preprocess + moe_rest; }
  int64_t moe() const { return moe_router + moe_preprocess + moe_rest; }  // the whole MoE block
};

struct KernelCalls {
  KernelPass forward, backward;
  KernelPass recompute;  // forward kernels run again before the backward (full or selective recompute)
  int64_t per_layer() const { return forward.total() + backward.total() + recompute.total(); }
  // The same kernels by scope (recompute in the backward's), plus the EP all-to-alls (dispatch
  // and combine each pass at ep > 1): what the host issues (plan/host_issue.h).
  ScopedKernels scoped_forward, scoped_backward;
  int64_t ep_alltoalls_per_pass = 0;
};

// Outside the layers: the embedding (lookup and dropout forward, the gradient's scatter-add
// backward) on the first stage, the logits (GEMM and fused cross-entropy forward, two GEMMs and
// the cross-entropy's backward) on the last.
constexpr int64_t kEmbeddingForwardKernels = 2, kEmbeddingKernels = 3;
constexpr int64_t kLogitsForwardKernels = 2, kLogitsKernels = 5;

// A MoE layer: the router's GEMM, its score function and top-k, the permute and unpermute, and
// the experts' GEMMs as Transformer Engine's GroupedLinear runs them (Megatron-Core's
// TEGroupedMLP): one cuBLAS GEMM per local expert (E / ep on the GPU) for the experts' input and
// output each, not one grouped kernel; the shared experts' two GEMMs.
KernelCalls layer_kernel_calls(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t cp,
                               int64_t ep = 1);

// Whether selective recomputation redoes the core attention's forward under `exec`: always with
// unfused attention (the scores are not stored), and with flash attention when
// recompute_flash_attention says so (one more fused forward per layer, as Megatron-Core runs it).
bool recomputes_core_attention(const ExecutionSpec& exec);

// Which GEMM inputs' FP8 casts run inside the kernel before the GEMM (recipe fp8_fused_casts):
// QKV's in the attention norm, FC1's in the MLP norm, FC2's in the activation, as Transformer
// Engine's LayerNormLinear and LayerNormMLP do. A MoE layer's experts read permuted tokens: only
// the QKV input's cast is fused there. The projection's input (the attention output) never is.
struct FusedCasts {
  bool qkv = false, fc1 = false, fc2 = false;
};
FusedCasts fused_fp8_casts(const ModelSpec& model, const ExecutionSpec& exec);

}  // namespace trident::plan
