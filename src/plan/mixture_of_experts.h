// Mixture-of-experts terms of the memory and step-time models.
//
// A MoE layer routes each of the T tokens of a micro-batch to k of E experts. With expert
// parallel each ep rank holds E / ep whole experts (split over tp like a dense MLP); tokens
// reach their experts by an all-to-all on the ep group (dispatch) and come back by another
// (combine), forward and backward. The capacity factor cf bounds an expert's tokens at cf x the
// mean T k / E, and the busiest rank paces the group, so expert GEMMs and all-to-alls are
// charged cf x the balanced load. FLOPs count what the tokens use: k routed experts plus the
// shared ones (active parameters). Layers that keep a dense MLP (moe_dense_layers) are averaged
// into the per-layer terms with their share of the layers.
#pragma once

#include <cstdint>

#include "core/execution_spec.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "plan/cost_model.h"

namespace trident::plan {

// Share of the layers that are MoE layers (1 for Mixtral, 58/61 for DeepSeek-V3; 0 when dense).
double moe_layer_share(const ModelSpec& model);

// The MLP part of one layer (forward, one micro-batch of `tokens` on one GPU), for a MoE model.
struct MoeCompute {
  int64_t local_experts = 0;       // E / ep on this GPU
  double tokens_per_expert = 0;    // token copies the busiest local expert takes: T k ep / E x cf
  double router_s = 0, router_flops = 0;    // T x h x E logits
  double routed_s = 0, routed_flops = 0;    // local experts' GEMMs (time with cf, FLOPs without)
  double shared_s = 0, shared_flops = 0;    // shared experts, every token
  double dense_s = 0, dense_flops = 0;      // the dense MLP of a dense layer
  // Per layer, the dense layers averaged in.
  double mlp_s = 0, mlp_flops = 0;
};
// peak_flops and peak_efficiency: those of the weight GEMMs (FP8 when the run uses it).
MoeCompute moe_compute(const ModelSpec& model, double tokens, int64_t tp, int64_t ep, double peak_flops,
                       double peak_efficiency, const CostConstants& c);

// All-to-all of an S-byte send buffer over n ranks: each rank keeps 1/n and sends the rest,
// (n-1) alpha + (n-1)/n S / beta.
double alltoall_time_s(double bytes, int64_t n, const GroupLink& link, const CostConstants& c);

struct EpComm {
  double message_bytes = 0;   // token copies one GPU sends: T / t x k x cf x h x element bytes
  double alltoall_s = 0;      // one all-to-all on the ep link
  int64_t forward_alltoalls = 0;   // dispatch + combine
  int64_t backward_alltoalls = 0;  // their gradients, and the recomputed forward ones
  double forward_s = 0;       // per layer, MoE share included
  double backward_s = 0;
};
EpComm ep_comm_per_layer(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t ep,
                         const GroupLink& link, const CostConstants& c);

// Activation elements the MLP of one layer keeps per micro-batch, before the 1/t split and the
// element size (Korthikanti's 8 s b f for SwiGLU, 4 s b f for GELU, per token copy), for a MoE
// model: k x cf token copies through routed experts, every token through the shared ones, the
// permuted input and output of the experts (2 s b h k cf), dense layers averaged in.
double moe_mlp_activation_elements(const ModelSpec& model, double sb);

// Parameters of one layer (averaged over the layers) on one GPU: the dense part (attention,
// norms, router, shared experts, the dense MLP of dense layers) and the routed experts.
struct MoeParams {
  double dense = 0;
  double experts = 0;
};
MoeParams moe_params_per_layer(const ModelSpec& model, int64_t tp, int64_t ep);
// Same with the model's parameter count already made (count_parameters(model)).
MoeParams moe_params_per_layer(const ModelSpec& model, const ParamCount& pc, int64_t tp, int64_t ep);

}  // namespace trident::plan
