// Context parallel (ring attention) terms of the memory and step-time models.
//
// With cp > 1 every rank of a cp group holds s / cp tokens of each sequence: causal load
// balancing gives it two chunks of s / (2 cp), one from each end, so every rank does the same
// attention work. Everything per token (weight GEMMs, activations, TP and PP messages, logits)
// is that of a sequence of s / cp; attention runs as cp blocks of (s/cp) x (s/cp): the local
// queries against each rank's keys and values, which are passed round the ring, each transfer
// overlapped with the attention of the block before it (Megatron-Core, Liu et al. 2023).
#pragma once

#include <cstdint>

#include "core/execution_spec.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "plan/cost_model.h"

namespace trident::plan {

// The model as one cp rank sees it: seq_len / cp tokens per sequence (cp must divide it).
ModelSpec per_rank_sequence(const ModelSpec& model, int64_t cp);

// K and V of one rank's chunk for one micro-batch, per GPU of the TP group:
// b x (s / cp) x 2 x kv_dim / t elements.
double kv_block_bytes(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t cp);

// Ring buffers: the block being sent and the one being received, forward, and the same for the
// key/value gradients backward: 4 KV blocks while a layer's attention runs. All-gathered (--cp-kind
// allgather): the whole sequence's K and V, and backward their gradients before the reduce-scatter:
// 2 cp KV blocks while a layer's attention runs.
double cp_ring_buffer_bytes(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t cp);

// --cp-kind allgather (Meta's Llama 3, torchtitan's default): the cp ranks all-gather K and V
// (cp blocks, (cp-1)/cp of them over the link) before the attention; the gather hides behind the
// local block's attention, which needs no other rank's keys. Backward gathers them again (behind
// the local block's backward) and reduce-scatters their gradients after it: exposed.
struct CpComm {
  int64_t cp = 1;
  CpKind kind = CpKind::Ring;
  double gather_s = 0;           // allgather: one all-gather of the cp KV blocks (the reduce-scatter takes as long)
  double block_bytes = 0;        // one KV block (kv_block_bytes)
  double block_transfer_s = 0;   // one block to the next rank on the cp link
  double block_attention_s = 0;  // forward attention of the local queries against one block
  double block_attention_backward_s = 0;  // its backward
  int64_t steps = 0;             // cp - 1 transfers per pass (ring)
  // Forward: each of the cp - 1 transfers hides behind one block's attention, the excess shows.
  double forward_total_s = 0, forward_exposed_s = 0;
  // Backward: the KV blocks and their gradients travel (2x the bytes) behind each block's
  // backward attention; full recomputation repeats the forward ring.
  double backward_total_s = 0, backward_exposed_s = 0;
  double hidden_s() const { return forward_total_s + backward_total_s - forward_exposed_s - backward_exposed_s; }
};
// block_attention_s / block_attention_backward_s: the attention time of one (s/cp) x (s/cp)
// block forward and backward (layer_compute gives them).
CpComm cp_comm_per_layer(const ModelSpec& model, const ExecutionSpec& exec, int64_t tp, int64_t cp,
                         const GroupLink& link, double block_attention_s, double block_attention_backward_s,
                         const CostConstants& c);

}  // namespace trident::plan
