#pragma once
// Megatron-Core's fine-grained selective recompute (--recompute-modules): the time and FLOPs of
// rerunning the named modules' forwards before their backward, per layer and micro-batch. What each
// drops from memory is plan::ModuleDrop (memory_model.h), from the same tensors; core_attn's rerun
// is the cost model's (the fused or unfused attention forward: recomputes_core_attention).

#include <functional>

#include "core/execution_spec.h"
#include "core/model_spec.h"
#include "plan/memory_model.h"

namespace trident::plan {

struct ModuleRecompute {
  double s = 0;      // per layer and micro-batch
  double flops = 0;  // executed, not model FLOPs
};

// gemm(k, n): one forward GEMM of the layer's tokens (T x k x n) at the layer's precision;
// elementwise_s_per_byte: the layer's memory-bound kernels' seconds per stored byte. mla_up_proj:
// the query and key/value up projections (split over tp; the rope is element-wise, not counted);
// moe_act: the routed experts' activation over the bytes it writes; layernorm: the two norms
// likewise; mlp: a dense layer's FC1 GEMM and activation (FC2's forward output is not needed:
// its backward reads the recomputed input), on the dense layers' share.
ModuleRecompute module_recompute(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, double tokens,
                                 const std::function<double(double, double)>& gemm, double elementwise_s_per_byte,
                                 const ModuleDrop& drop);

}  // namespace trident::plan
