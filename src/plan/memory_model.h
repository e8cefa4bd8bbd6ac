// Memory model: bytes on one GPU of each pipeline stage, term by term, with the inputs that
// give each term (docs/formulas.md: ZeRO paper for model states, Korthikanti et al. 2022
// Table 2 for activations, Megatron's schedules for the micro-batches in flight).
#pragma once

#include <cstdint>
#include <vector>

#include "core/execution_spec.h"
#include "core/model_spec.h"

namespace trident::plan {

// Bytes per parameter of each model state for a training recipe, before ZeRO sharding.
// Optimizer states: master copy + momentum + variance of optimizer_state_bits each (no master
// copy in fp32 training); FP8 weights: the 16-bit copy + its FP8 cache, or 1 byte with fp8_params.
struct StateBytes {
  double weights = 2;    // 16-bit weights (4 for fp32; 3 fp8: bf16 + FP8 cache; 1 with fp8_params)
  double gradients = 4;  // fp32 main grads (grad_bits / 8)
  double optimizer = 12; // fp32 master copy + Adam momentum + variance (8 for fp32: no master copy; half at 16 bits)
  double gathered = 2;   // what a DP weight all-gather moves: the 16-bit weights (4 fp32, 1 with fp8_params)
};
StateBytes state_bytes(Precision precision, int grad_bits, const RecipeSettings& recipe = {});
StateBytes state_bytes(const ExecutionSpec& exec);

// Parameters held by one GPU of stage i (its layers / t, the embedding on the first stage, the
// tied output copy on the last when pp > 1, the final norm on the last).
struct StageParams {
  double layer_params = 0;      // sum over its layers of per-layer params held by this GPU (dense part)
  double expert_params = 0;     // MoE: its layers' routed experts on this GPU (E / ep of them, each 1 / etp of one)
  double embedding_params = 0;  // token (padded vocab / t) + positions, first stage
  double output_params = 0;     // output layer (untied, or tied copy when pp > 1) + final norm, last stage
  double total() const { return layer_params + expert_params + embedding_params + output_params; }
  double dense() const { return total() - expert_params; }
};
StageParams stage_params(const ModelSpec& model, int64_t tp, int64_t pp, int64_t layers_on_stage, bool first,
                         bool last, int64_t ep = 1, int64_t etp = 1);
// Same with the model's parameter count already made (count_parameters(model)): a stage split
// counts the model once, not once per stage.
StageParams stage_params(const ModelSpec& model, const ParamCount& pc, int64_t tp, int64_t pp, int64_t layers_on_stage,
                         bool first, bool last, int64_t ep, int64_t etp = 1);

// Activation bytes one layer keeps for one micro-batch, per GPU (Korthikanti Table 2). With
// context parallel pass the per-rank model (per_rank_sequence): s / cp tokens, and the scores
// of one (s/cp)^2 block, as ring attention holds one block at a time.
// What each module of --recompute-modules (Megatron-Core's names) drops from one layer's stored
// activations, in bytes as the layer holds them (plan/recompute_modules.h for its time), and the
// 16-bit bytes its element-wise forward writes again.
struct ModuleDrop {
  double core_attn = 0, mla_up_proj = 0, moe_act = 0, layernorm = 0, mlp = 0;
  double fp8_core_attn = 0, fp8_moe_act = 0, fp8_layernorm = 0, fp8_mlp = 0;  // of them, quantised copies
  double moe_act_written = 0, layernorm_written = 0, mlp_act_written = 0;
};
struct LayerActivations {
  double bytes = 0;                 // what stays in memory between forward and backward
  double attention_scores_bytes = 0;  // the 5 a s^2 b / t part, if kept
  double full_layer_bytes = 0;      // a whole layer's activations (needed while recomputing one)
  double deferred_grad_bytes = 0;   // ZB-H1: output gradients kept until the weight-gradient pass (in bytes)
  double fp8_copy_bytes = 0;        // FP8: the 1-byte copies of the FP8 GEMMs' inputs, part of bytes
  double fp8_given_up_bytes = 0;    // FP8: the 16-bit GEMM inputs held as those copies only, not in bytes
  ModuleDrop module_drop;           // every module's drop, selected or not (bytes subtracts the selected)
};
LayerActivations layer_activations(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t etp = 1);

// Micro-batches (in layer-chunk units: each counts chunk_layers layers) in flight on stage i.
// GPipe m; 1F1B min(m, p - i); ZB-H1 min(m, p) (held until the deferred weight gradient); interleaved min(m v, 2(p - i - 1) + (v - 1) p + 1)
// chunks (Megatron's warm-up count plus one).
double chunks_in_flight(ScheduleKind schedule, int64_t stage, int64_t pp, int64_t virtual_stages,
                        int64_t micro_batches);

// Micro-batches between their forward and their backward through the first model chunk of stage 0,
// the one that holds the embedding (and so its dropout mask). Without interleaving that is stage
// 0's chunks_in_flight; interleaved min(m, 2p): Megatron's warm-up runs groups of p micro-batches
// chunk by chunk, and chunk 0's first backward comes after its second group's forwards.
double first_chunk_micro_batches_in_flight(ScheduleKind schedule, int64_t pp, int64_t virtual_stages,
                                           int64_t micro_batches);

struct StageMemory {
  int64_t stage = 0;
  int64_t layers = 0;
  StageParams params;
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;   // layers + embedding output / logits and loss
  double in_flight = 0;           // micro-batch chunks whose activations are held
  double per_layer_activation_bytes = 0;
  double per_layer_fp8_copy_bytes = 0;  // of it, FP8 copies of GEMM inputs (--precision fp8)
  double logits_bytes = 0;        // last stage: fp32 logits (4 s b V / t) + loss (per chunk in flight under ZB-H1)
  double embedding_activation_bytes = 0;  // first stage: embedding dropout masks of micro-batches in flight
  double embedding_in_flight = 0;         // those micro-batches (first_chunk_micro_batches_in_flight)
  double cp_ring_buffer_bytes = 0;  // cp > 1: KV blocks in flight round the ring (part of activations)
  double expert_state_bytes = 0;    // MoE: weights + gradients + optimizer states of the routed experts
                                    // (sharded over the edp ranks); the rest of the three is dense
  double overhead_bytes = 0;
  // Under FP8 GEMMs: the embedding / output layer params, held at 16 bits without quantised copies.
  double plain_weight_params = 0;
  double gathered_weights_bytes = 0;  // ZeRO-3: the layer in use and the prefetched one, unsharded
  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + overhead_bytes +
           gathered_weights_bytes;
  }
};

// ZeRO shards the dense states over dp x cp (Megatron's data-parallel group with context
// parallel) and the expert states over the dp x cp / ep ranks holding the same experts.
struct MemoryInputs {
  int64_t tp = 1, pp = 1, dp = 1;
  double overhead_bytes = 0;
  int64_t cp = 1, ep = 1;
  int64_t etp = 1;  // expert tensor parallel: the routed experts' split, and with ep their edp group
};
std::vector<StageMemory> stage_memory(const ModelSpec& model, const ExecutionSpec& exec, const MemoryInputs& in);

}  // namespace trident::plan
