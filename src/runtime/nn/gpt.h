// GPT-2 and Llama forward and backward, written out layer by layer (no autograd tape).
//
// A GptStage runs one Shard (see param_layout.h): some layers, plus the embedding when it holds
// the input and the final norm + LM head + cross-entropy when it holds the output.
//
// Families (ModelSpec::family): GPT has learned positions, LayerNorms with biases, a GELU MLP,
// biases everywhere and the head tied to wte. Llama (Touvron et al. 2023) has RMSNorms, a SwiGLU
// MLP (silu(x W_gate) * (x W_up), then W_down = fc_proj), rotary position embeddings on the
// queries and keys (Meta's interleaved-pair convention, base ModelSpec::rope_theta), grouped-query attention
// (kv_heads key/value heads, each serving heads/kv_heads query heads), no biases and an untied
// head. Under TP the kv heads are split across ranks like the query heads; when tp exceeds
// kv_heads each rank holds the one kv head its query heads use (Megatron's replication), and the
// gradient of those replicated weights is summed over the ranks holding them, so every replica
// stays equal. The attention kernels see the kv heads repeated per query head (gqa_expand).
// Whole model = Shard::whole(spec). Pipeline stage = a Shard with [first_layer, last_layer) and
// has_input / has_output set; its boundary tensors are Activations::input() (receive before
// forward when !has_input), output() (send after forward when !has_output), output_grad()
// (receive before backward when !has_output) and input_grad() (send after backward when
// !has_input); all are [tokens_local, C] in the compute type, so bf16 stages send bf16 (as
// Megatron does), half the bytes of fp32.
//
// Tensor parallelism (Megatron): pass the TP group's Communicator. The stage then holds its
// slice (Shard::tp_size/tp_rank) and places the collectives itself:
//   - QKV and fc are column-parallel: identity forward, all-reduce of the input gradient backward;
//   - attention projection and fc projection are row-parallel: all-reduce of the output forward
//     (bias added by tp rank 0 only, so the sum carries it once);
//   - wte is vocabulary-parallel: lookup of the slice's ids then all-reduce; the head's logits
//     stay sharded and the cross-entropy all-reduces the row max, the sum of exps and the
//     target logit (never the logits).
// Without a communicator (nullptr) tp_size must be 1.
//
// Sequence parallel (Megatron, Korthikanti et al. 2022; sequence_parallel = true, tp > 1): the
// residual stream, LayerNorms and residual adds hold only this rank's positions of each
// sequence: [B, T/tp, C], rank r holding positions [r*T/tp, (r+1)*T/tp). The all-reduce after
// the row-parallel layers becomes a reduce-scatter along the sequence, the LayerNorm output is
// all-gathered before the column-parallel layers; backward does the conjugates. The embedding
// output is reduce-scattered (positions added once, by tp rank 0, before it), the final
// LayerNorm runs on the shard and the head's input is all-gathered. LayerNorm weight/bias
// gradients are partial per rank: each backward sums them over the TP group (one small
// all-reduce per layer) before accumulating, so grads() are final and equal on every TP rank,
// as without sequence parallelism. Boundary tensors (input/output/gradients) are then
// [tokens_local(), C]. Requires T % tp == 0.
//
// Context parallel (pass the cp group's Communicator, size > 1): each sequence of T tokens is
// split over the group with causal load balancing (context_split.h): the stage holds
// T / cp rows of each sequence, its two chunks, and T() is that local length. Everything but
// attention is per token and runs on the local rows; the learned positions (GPT) and the
// rotary angles (Llama) are the chunks' true positions; attention is ring attention
// (ring_attention.h): KV blocks passed round the group behind the blocks' compute, merged by
// the online softmax, so a layer keeps its lse instead of the probabilities (selective
// recomputation then has nothing to recompute; full reruns the ring). Gradients are partial
// per cp rank: the trainer sums them over dp x cp. Requires T % (2 cp) == 0.
//
// Gradient-ready hook (for data-parallel overlap): set_grad_ready_hook(f) makes backward call
// f(begin, end) as soon as the gradients of flat range [begin, end) are final for this
// micro-batch (after the head, after each layer, after the embedding), so DP buckets can start.
//
// Precision (compute dtype, StageConfig::compute): F32 computes everything in fp32 (CPU and
// CUDA). BF16 (CUDA; Kernels::supports says where) is Megatron's mixed precision: weights are
// used through a bf16 copy, activations and the residual stream are bf16, while params() and
// grads() -- what the optimizer, the gradient sync and checkpoints see -- stay the fp32 master
// weights and fp32 gradients, and the AdamW moments are fp32. After every optimizer step the
// trainer calls params_updated(), which refreshes the bf16 copy (a no-op in fp32; under ZeRO-1
// params_updated(begin, end) for each bucket as its weight all-gather completes). Pipeline
// boundary tensors stay fp32 in both precisions (converted at the stage's edges), so the
// trainer's sends and receives do not depend on the precision.
//
// Memory: the stage's scratch and each Activations are one allocation each (BufferPlan), and
// memory_table() lists their regions by name. Under ZeRO-2/3 the trainer hands a UnitStorage:
// gradients (and weights) are then asked for unit by unit and the stage keeps no whole buffer
// of them.
//
// Activation recomputation (StageConfig::recompute, the planner's recipes): None keeps every
// layer activation of a micro-batch until its backward. Selective (Korthikanti et al. 2022)
// drops the attention core's softmax probabilities: forward writes them to one scratch of the
// stage and backward recomputes them from the kept q, k, v before the attention backward.
// Full keeps only each layer's input (the residual stream between layers): forward runs every
// layer through one scratch set of the stage's, and backward recomputes a layer's forward from
// its input (TP collectives included) right before that layer's backward. The kernels are
// deterministic, so the losses and gradients are bit-identical to None on the CPU.
// layer_scratch_bytes() is that scratch; Activations::floats() what one micro-batch keeps.
//
// Several micro-batches can be in flight (pipeline schedules): each owns an Activations object;
// the gradient scratch is shared by the stage (one backward runs at a time).
// Gradients ACCUMULATE into grads() over micro-batches: zero_grads() at the start of a step.
// Losses: forward computes per-token losses; backward takes dloss, the weight of each token's
// loss in the objective (1 / tokens in the global batch for a mean over the global batch).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/execution_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/buffer_plan.h"
#include "runtime/nn/context_split.h"
#include "runtime/nn/param_layout.h"
#include "runtime/nn/ring_attention.h"

namespace trident::nn {

using kernels::Tensor;

// A mixture-of-experts layer's views (moe_layer.cpp): its assignments in expert order (M <= N k
// rows) through the experts' MLPs, the routing's device arrays, and the host routing.
// Under expert parallelism the rows go to their experts' ranks: xr / yr are the rows this rank's
// experts received ([R, C], R <= ep N min(k, E/ep)) and hpre / h have R rows; without it xr is xs
// and yr is ys.
struct MoeActs {
  Tensor xs, hpre, h, ys;      // [M, C] gathered inputs, [M, F_in] before the activation, [M, F] after, [M, C] outputs
  Tensor xr, yr;               // [R, C] received inputs, their experts' outputs
  int32_t* rows = nullptr;     // [M] token of each row (device int32)
  int32_t* pos = nullptr;      // [N k] row of each assignment, -1 when dropped
  float* weight = nullptr;     // [N k] combine weights
  float* row_weight = nullptr; // [M]
  MoeRouting* route = nullptr; // host
  // Split backward (ZB-H1): the router logits' gradient [N, E], kept from the input-gradient
  // pass for the weight pass. That pass also finds each expert's output gradients in yr and its
  // input projection's output gradients in hpre (both dead once the input gradients are through).
  Tensor dlogits;
  // Expert tensor parallel (etp > 1): the etp group's received rows, gathered ([etp R, C], each
  // member's R padded to the group's largest), which this rank's expert slices run on; else xr.
  Tensor xg;
};

// Per-layer activation views kept for the backward (regions of the Activations buffer). Tensors
// are in the stage's compute dtype; statistics and attention probabilities are fp32.
struct LayerActs {
  Tensor ln1;                 // [Nl,C] (the local rows; gathered again under sequence parallelism)
  float *ln1_mean, *ln1_rstd;  // [Nl], [Nl] (Llama's RMSNorm: rstd only, mean nullptr)
  Tensor qkv;                 // [N, 3*C/tp] (Llama: the rotated q, k and repeated kv heads)
  Tensor q, kv;               // Llama: [N, C/tp] queries, [N, kv_local] keys then values, before RoPE (forward only: stage scratch)
  float* probs;               // attention_probs_size() floats (packed causal softmax on the CPU)
  Tensor atty;                // [N, C/tp]
  Tensor res_mid;             // [Nl,C] residual after attention
  Tensor ln2;                 // [Nl,C]
  float *ln2_mean, *ln2_rstd;
  Tensor fch;                 // [N, F/tp] before GELU (Llama: [N, 2F/tp] gate then up)
  Tensor fch_gelu;            // [N, F/tp] after GELU (Llama: after SwiGLU)
  Tensor res_out;             // [Nl,C] residual after the MLP = next layer's input
  // Split backward (ZB-H1): the layer's output gradient and the gradient after attention (local
  // rows), kept from the input-gradient pass for the weight pass. That pass also finds the MLP
  // input projection's output gradient in fch and the q/k/v projections' in qkv (both dead once
  // the input gradients are through).
  Tensor d_out, d_mid;
  MoeActs moe;                // mixture-of-experts layers only (fch, fch_gelu are then empty)
  // QK-norm (Llama family with ModelSpec::qk_norm): the queries' and keys' values before their
  // per-head RMSNorm ([N, (nh + nkv) hd], queries then keys) and its rstd [N (nh + nkv)].
  Tensor qk_in;
  float* qk_rstd = nullptr;
  // Multi-head latent attention (mla_layer.cpp, MlaViews): the latents, their norms' inputs,
  // the up-projected heads and the attention output the projection reads, in one region;
  // the two latent RMSNorms' rstd [2 N].
  Tensor mla;
  float* mla_rstd = nullptr;
};

// Elements of LayerActs::mla per token (mla_layer.cpp).
int64_t mla_activation_width(const Shard& s);
// Elements per token of the stage's MLA backward scratch, and fp32 elements of the replicated
// weights' gradients summed over tp (mla_layer.cpp).
int64_t mla_scratch_width(const Shard& s);
int64_t mla_replicated_grads(const Shard& s);

class GptStage;

// Multi-token prediction depth k's activations (mtp.cpp; DeepSeek-V3 section 2.2): at local row
// i the embedding of token t_{i+k} and the previous depth's hidden state, each RMS-normed,
// concatenated (embedding first, as Megatron-Core) and projected (eh_proj) into the depth's
// layer, whose output's norm feeds the shared head predicting t_{i+k+1}.
struct MtpActs {
  Tensor emb, e, h;               // [Nl, C] embedding rows, enorm(emb), hnorm(previous hidden)
  float *e_rstd = nullptr, *h_rstd = nullptr;
  Tensor cat;                     // [Nl, 2C] e then h per row
  Tensor x;                       // [Nl, C] eh_proj(cat): the layer's input
  Tensor fin;                     // [Nl, C] the depth's final norm of the layer's output
  float* fin_rstd = nullptr;
  Tensor logits;                  // [N, V/tp]
  float *losses = nullptr, *row_max = nullptr, *sumexp = nullptr, *target_logit = nullptr;
  std::vector<int32_t> in_tok;    // [N] the token k positions on (0 past the sequence's end, as Megatron's roll)
  std::vector<int32_t> tgt;       // [N] the label k positions on, -1 past the end (no loss)
};

// One micro-batch's activations for a stage (allocated once, reused every step).
class Activations {
 public:
  Activations(const GptStage& stage);
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;

  // Pipeline boundaries, [tokens_local, C] in the compute type: the received input (stages
  // without the embedding) and the output to send (stages without the head).
  Tensor input() { return res_in_; }
  Tensor output() { return out_; }
  const LayerActs& layer(int64_t i) const { return layers_[i]; }
  Tensor logits() { return logits_; }       // [N, padded V/tp] (row stride Shard::vocab_local()), compute dtype (overwritten by its gradient in backward)
  float* losses() { return losses_; }       // [N] per-token losses (has_output)
  Tensor mtp_logits(int64_t k) { return mtp_.at(size_t(k - 1)).logits; }  // depth k's, as logits()
  // Mixture of experts: the routing of each MoE layer of the last forward (nullptr for a dense
  // layer; under full recomputation the stage's scratch routing, the last layer recomputed).
  const MoeRouting* routing(int64_t i) const { return layers_[i].moe.route; }
  int64_t floats() const { return int64_t(plan_.bytes() / sizeof(float)); }
  std::string memory_table() const { return plan_.table("activations of one micro-batch"); }

 private:
  friend class GptStage;
  BufferPlan plan_;
  Tensor res_in_;                 // [Nl,C] compute dtype: embedding output or converted input
  Tensor out_;                    // the last residual (res_in_ when the stage holds no layer)
  std::vector<LayerActs> layers_;
  std::vector<MoeRouting> routes_;  // one per layer (used by the MoE layers)
  std::vector<MtpActs> mtp_;        // multi-token prediction depths (stages with the output)
  double moe_aux_ = 0;              // the MoE layers' auxiliary losses of the last forward
  Tensor lnf_, logits_;
  float *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *losses_ = nullptr;
  float *row_max_ = nullptr, *sumexp_ = nullptr, *target_logit_ = nullptr;
};

// How a stage runs its shard: the micro-batch shape, its groups, precision, recomputation, a
// split backward and the trainer's storage. Named fields (designated initializers at the call
// sites) rather than a row of positional arguments, so a new option is one field.
struct StageConfig {
  int64_t B = 0;  // sequences per micro-batch (required, > 0)
  int64_t T = 0;  // tokens per sequence (required, 0 < T <= model.seq_len)
  comm::Communicator* tp = nullptr;  // the tensor-parallel group (nullptr: Shard::tp_size must be 1)
  bool sequence_parallel = false;    // only with tp > 1
  // F32, or BF16 where k.supports() it (otherwise an InputError naming the device).
  kernels::DType compute = kernels::DType::F32;
  Recompute recompute = Recompute::None;
  // backward_input / backward_weight are available (micro-batches keep the linears' output
  // gradients between them); not with full recomputation.
  bool split_backward = false;
  comm::Communicator* cp = nullptr;  // the context-parallel group (nullptr or size 1: whole sequences)
  // The trainer's unit-by-unit weights and/or gradients (ZeRO-2/3, param_layout.h); the stage
  // then allocates no whole buffer for what it holds (params() / grads() are null).
  UnitStorage* storage = nullptr;
  // Multi-token prediction: the objective adds mtp_loss_scaling / D x each depth's mean loss
  // (over the rows with a target; Megatron's --mtp-loss-scaling-factor).
  float mtp_loss_scaling = 0.1f;
};

class GptStage {
 public:
  GptStage(kernels::Kernels& k, const Shard& shard, const StageConfig& config);
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  const Shard& shard() const { return layout_.shard(); }
  const ParamLayout& layout() const { return layout_; }
  kernels::Kernels& kernels() const { return k_; }
  kernels::DType compute_dtype() const { return dt_; }
  int64_t B() const { return B_; }
  int64_t T() const { return T_; }  // rows of each sequence this rank holds (T / cp)
  const ContextSplit& context() const { return ctx_; }
  // Context parallel: the ring's exposed exchange and block compute (nullptr without cp).
  RingAttention* ring() { return ring_.get(); }
  // Floats of what a layer keeps of its attention core per micro-batch: the probabilities, or
  // the ring's lse.
  size_t attention_state_floats() const;
  int64_t N() const { return B_ * T_; }
  bool sequence_parallel() const { return sp_; }
  Recompute recompute() const { return rc_; }
  bool split_backward() const { return split_; }
  // Bytes of the layer scratch the micro-batches share: one layer's activations (full
  // recomputation) or attention probabilities (selective), Llama's forward-only q and kv, and
  // the context-parallel ring's KV blocks.
  size_t layer_scratch_bytes() const { return rc_plan_.bytes() + (ring_ ? ring_->bytes() : 0); }
  // Tokens of the residual stream this rank holds: N, or N/tp under sequence parallelism.
  int64_t tokens_local() const { return sp_ ? N() / layout_.shard().tp_size : N(); }
  // Floats of a pipeline boundary tensor (input, output and their gradients).
  int64_t boundary_floats() const { return tokens_local() * layout_.shard().C(); }

  // Expert parallelism: the EP group (size Shard::ep_size; before the first forward).
  void set_expert_group(comm::Communicator* ep) { ep_ = ep; }
  // Expert tensor parallelism: the ETP group (size Shard::etp_size; before the first forward).
  void set_expert_tensor_group(comm::Communicator* etp) { etp_ = etp; }
  // The expert bias of local MoE layer i (Shard::moe.expert_bias: E floats the trainer owns and
  // updates between steps; read by every forward's top-k).
  void set_expert_bias(int64_t i, const float* bias) {
    moe_bias_.resize(size_t(layout_.all_layers()), nullptr);
    moe_bias_.at(size_t(i)) = bias;
  }

  // f(begin, end): gradients of [begin, end) are final for the running backward (nullptr: off).
  void set_grad_ready_hook(std::function<void(int64_t begin, int64_t end)> hook) { grad_hook_ = std::move(hook); }
  // f(begin, end): forward is about to read the weights of [begin, end) (the embedding, each
  // layer, the head): ZeRO-1's weight all-gathers complete there (nullptr: off).
  void set_weights_needed_hook(std::function<void(int64_t begin, int64_t end)> hook) { weights_hook_ = std::move(hook); }

  float* params() { return params_; }  // fp32 master weights, flat, layout().total() floats
  float* grads() { return grads_; }    // fp32 gradients, same layout
  void zero_grads();
  // params() changed (optimizer step, checkpoint load): refresh the compute copy (bf16 only),
  // of all of them or of flat [begin, end).
  void params_updated();
  void params_updated(int64_t begin, int64_t end);
  // The stage's allocations (weights, gradients, backward scratch) by region.
  std::string memory_table() const { return plan_.table("model stage (" + std::string(comm::dtype_name(dt_)) + ")"); }

  // GPT-2 initialisation (Llama too): N(0, 0.02) for matrices and embeddings, N(0, 0.02/sqrt(2L))
  // for the two residual projections, zeros for biases, ones/zeros for norms. Deterministic for a
  // seed and independent of the layout: element (r, c) of a logical tensor gets the same value
  // whatever slice holds it.
  void init_params(uint64_t seed);

  // tokens/targets: device pointers, [B*T] (tokens used when has_input, targets when has_output;
  // with multi-token prediction the output stage reads tokens too, host ids).
  void forward(Activations& a, const int32_t* tokens, const int32_t* targets);
  // Sum of the per-token losses of the last forward (host; has_output only).
  double loss_sum(Activations& a);
  // Multi-token prediction depth k (1..Shard::mtp_count()): the sum of its per-token losses over
  // the rows with a target (those of the last k positions of a sequence have none).
  double mtp_loss_sum(Activations& a, int64_t k);
  // Mixture of experts: the auxiliary losses (load balancing + z-loss, with their coefficients)
  // of this stage's MoE layers in the last forward of `a`. The objective weighs them once per
  // micro-batch: backward's dloss x N (the mean over the global batch's micro-batches).
  double moe_aux_loss(const Activations& a) const { return a.moe_aux_; }
  // dloss = weight of each token's loss; on a stage without output, a.output_grad must be set
  // (output_grad() buffer filled) before calling.
  void backward(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss);
  // The same backward in two halves (zero-bubble schedules; split_backward stages only).
  // backward_input: everything but the weight and bias gradients of the linear layers (the LM
  // head included) -- the input gradient to send, norm and embedding gradients; it keeps the
  // linears' output gradients in `a`. backward_weight: those weight and bias gradients, from
  // what `a` kept (run it before `a` is reused). Together they add to grads() what backward does.
  void backward_input(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss);
  void backward_weight(Activations& a);

  // Compute type, [tokens_local, C]: receive dL/d(output) here when !has_output; dL/d(input)
  // after backward when !has_input.
  Tensor output_grad() { return dres_.slice(0, size_t(boundary_floats())); }
  Tensor input_grad() const { return dres_.slice(0, size_t(boundary_floats())); }

  // Explicit per-layer functions (local layer index i of this stage).
  void layer_forward(Activations& a, int64_t i, const Tensor& res_in);
  // dres: gradient of the layer's output on entry, of its input on return (in place).
  void layer_backward(Activations& a, int64_t i, const Tensor& res_in, const Tensor& dres);

 private:
  friend class Activations;
  void all_reduce_tp(const Tensor& x, comm::ReduceOp op = comm::ReduceOp::Sum);
  void all_reduce_tp(float* x, size_t n, comm::ReduceOp op = comm::ReduceOp::Sum) { all_reduce_tp(Tensor(x, n), op); }
  Tensor W(int64_t offset, int64_t n) const {  // compute weights
    if (!ext_w_) return w_.slice(size_t(offset), size_t(n));
    if (offset < 0) return Tensor();  // a tensor the shard does not hold (never read)
    const int64_t u = layout_.unit_of(offset);
    return Tensor(const_cast<float*>(storage_->unit_weights(u)) + (offset - layout_.units()[size_t(u)].begin), size_t(n));
  }
  // fp32 gradient of flat element `offset` (the stage's buffer, or the trainer's unit).
  float* grad_at(int64_t offset) const {
    if (!ext_g_) return grads_ + offset;
    const int64_t u = layout_.unit_of(offset);
    return storage_->unit_grads(u) + (offset - layout_.units()[size_t(u)].begin);
  }
  bool tp_lead() const { return layout_.shard().tp_rank == 0; }
  // Sequence parallel: full [B,T,C] partial sums -> this rank's [B,T/tp,C] (summed over TP),
  // and this rank's [B,T/tp,C] -> full [B,T,C] (out must not alias the input).
  void sp_reduce_scatter(const Tensor& out, const Tensor& full);
  void sp_all_gather(const Tensor& full, const Tensor& shard);
  // Row-parallel output -> residual rows this rank holds: all-reduce in place, or reduce-scatter
  // of `partial` into out under sequence parallelism.
  void reduce_rows(const Tensor& out, const Tensor& partial);
  // Norm of the local rows into out ([tokens_local, C], what the micro-batch keeps); returns the
  // full [N,C] the column-parallel layer reads: out itself, or gathered into full_ under
  // sequence parallelism.
  Tensor norm_full(const Tensor& out, float* mean, float* rstd, const Tensor& inp, int64_t w, int64_t b);
  // Local rows [tokens_local, C] as the full [N,C]: themselves, or gathered into full_ (SP).
  Tensor gathered(const Tensor& rows);
  // Gradient of the local rows -> full [N,C] gradient (gathered under sequence parallelism).
  Tensor full_grad(const Tensor& dres);
  // Column-parallel input gradient (partial over TP, [N,C]) -> summed gradient of the local rows.
  Tensor local_grad(const Tensor& partial);
  // Where LayerNorm weight/bias gradients go: grads() directly, or the TP-summed scratch slot i.
  float* norm_grad(int64_t offset, int slot) { return sp_ ? lngrad_ + slot * layout_.shard().C() : grad_at(offset); }
  void sum_norm_grads(std::initializer_list<int64_t> offsets);
  // The family's norm (LayerNorm or RMSNorm) backward of local rows; bias offset -1 for RMSNorm.
  void norm_backward(const Tensor& dres, int64_t w, int64_t b, int slot, const Tensor& dout, const Tensor& inp,
                     const float* mean, const float* rstd);
  // The layer functions on explicit activation views (a micro-batch's, or the recompute scratch).
  // The backward computes the linears' weight gradients when weights_now_, else keeps their
  // output gradients in x for the *_layer_weights pass.
  void gpt_layer_forward(const LayerActs& x, int64_t i, const Tensor& res_in);
  void gpt_layer_backward(const LayerActs& x, int64_t i, const Tensor& res_in, const Tensor& dres);
  void gpt_layer_weights(const LayerActs& x, int64_t i);
  void llama_layer_forward(const LayerActs& x, int64_t i, const Tensor& res_in);
  void llama_layer_backward(const LayerActs& x, int64_t i, const Tensor& res_in, const Tensor& dres);
  void llama_layer_weights(const LayerActs& x, int64_t i);
  void backward_pass(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss);
  // Layer i's backward from its kept input, rerunning its forward first under full recomputation.
  void run_layer_backward(Activations& a, int64_t i, const Tensor& res_in, const Tensor& dres);
  // The embedding of tokens [N] into rows [tokens_local, C] (vocabulary-parallel lookup, summed
  // or reduce-scattered over tp), and its backward into the gradient of the table at `wte`.
  void embed(const Tensor& rows, const int32_t* tokens, int64_t wte);
  void embed_backward(const Tensor& drows, const int32_t* tokens, int64_t wte);
  // Multi-token prediction (mtp.cpp): the depths' inputs for a micro-batch (under cp gathered
  // from the other ranks' targets), their forward from the main hidden state h, and their
  // backward, which leaves the main hidden state's gradient share in mtp_carry_.
  void mtp_tokens(Activations& a, const int32_t* tokens, const int32_t* targets);
  void mtp_forward(Activations& a, const Tensor& h);
  void mtp_backward(Activations& a, const Tensor& h, float dloss);
  float mtp_scaling_ = 0.1f;
  Tensor mtp_dcat_, mtp_half_, mtp_carry_;  // [Nl, 2C], [Nl, C], [Nl, C] backward scratch
  float* mtp_wgrad_ = nullptr;               // sequence parallel: eh_proj's partial gradient [C, 2C]
  // Mixture of experts (moe_layer.cpp): the routed MLP of layer i from inp (the norm output,
  // [N, C]) into out (overwritten), and its backward from dout to dinp (overwritten; its inp is
  // the norm's rows as kept, this rank's under sequence parallelism).
  void moe_forward(const MoeActs& m, const LayerParams& p, const Tensor& inp, const Tensor& out);
  void moe_backward(const MoeActs& m, const LayerParams& p, const Tensor& inp, const Tensor& dout, const Tensor& dinp);
  // A MoE layer's MLP: the routed experts and, where the model has them, the shared experts
  // (split over tp, their activations in the layer's fch / fch_gelu), summed into out; and its
  // backward. Same arguments as moe_forward / moe_backward.
  void moe_mlp_forward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& out);
  void moe_mlp_backward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& dout,
                        const Tensor& dinp);
  void shared_experts_forward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& out);
  void shared_experts_backward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& dout,
                               const Tensor& dinp);
  // A split backward's weight pass of a MoE layer's MLP (router, routed and shared experts),
  // from what moe_mlp_backward kept in x (see MoeActs::dlogits).
  void moe_mlp_weights(const LayerActs& x, const LayerParams& p);
  // Expert e (local index) on received rows [first, first + n).
  void moe_expert_forward(const MoeActs& m, const LayerParams& p, int64_t e, int64_t first, int64_t n);
  std::vector<uint8_t> own_tokens() const;  // tp > 1: this tp rank's tokens [N], the ones it dispatches
  void moe_expert_backward(const MoeActs& m, const LayerParams& p, int64_t e, int64_t first, int64_t n);
  // Runs f(local expert, first row, rows) over the chunks the experts run on: the received ones
  // (rank-major); under etp > 1 those of each etp member in turn, member i's from row i x stride.
  template <class F>
  void moe_chunks(const MoeRouting& r, F&& f) {
    const int64_t El = shard().experts_local(), per = int64_t(r.recv_expert_rows.size());
    const std::vector<int64_t>& rows = shard().etp_size > 1 ? r.etp_rows : r.recv_expert_rows;
    for (int64_t i = 0; i < int64_t(rows.size()) / std::max<int64_t>(per, 1); ++i) {
      int64_t first = i * r.etp_stride;
      for (int64_t c = 0; c < per; ++c) {
        f(c % El, first, rows[size_t(i * per + c)]);
        first += rows[size_t(i * per + c)];
      }
    }
  }
  // Expert tensor parallel: the rows the experts run on (xg) and their outputs (partial sums over
  // etp until reduce-scattered into yr), the output gradients (gathered) and input gradients.
  Tensor expert_out(const MoeActs& m) const { return shard().etp_size > 1 ? moe_yg_ : m.yr; }
  Tensor expert_dy() const { return shard().etp_size > 1 ? moe_dyg_ : moe_dyr_; }
  Tensor expert_dx() const { return shard().etp_size > 1 ? moe_yg_ : moe_dxr_; }
  void etp_gather(const Tensor& rows, const Tensor& gathered, const MoeRouting& r);
  void etp_reduce(const Tensor& partial, const Tensor& rows, const MoeRouting& r);
  comm::Communicator* etp_ = nullptr;
  // Expert parallel: the row counts of each (rank, local expert) exchanged (r.send_rows etc.),
  // and rows of C values moved from this rank's expert order to the experts' ranks (or back).
  void moe_exchange_counts(MoeRouting& r);
  void moe_move(const Tensor& from, const Tensor& to, const MoeRouting& r, bool back);
  comm::Communicator* ep_ = nullptr;
  std::vector<const float*> moe_bias_;  // per local layer: its expert bias (set_expert_bias), or nullptr
  comm::Communicator* moe_cp_ = nullptr;  // context parallel: the ranks sharing each micro-batch's auxiliary losses
  void moe_whole_batch_aux(MoeRouting& r);  // the auxiliary losses over the cp ranks' tokens
  std::vector<uint8_t> moe_cp_keep(const MoeRouting& r, int64_t capacity);  // dropping over the cp ranks' tokens
  float moe_aux_weight_ = 0;  // the running backward's weight of the auxiliary losses (dloss x N)
  float* wgrad(int64_t offset) const { return weights_now_ ? grad_at(offset) : nullptr; }
  // A linear's input, read only for its weight gradient: x, or a kept norm output's rows gathered.
  Tensor winput(const Tensor& x) const { return weights_now_ ? x : Tensor(); }
  Tensor winput_rows(const Tensor& rows) { return weights_now_ ? gathered(rows) : Tensor(); }
  // Split backward: keep `from` (count elements of it) in `to` for the weight pass.
  void keep(const Tensor& to, const Tensor& from) {
    if (!weights_now_) k_.convert(to.slice(0, from.count), from);
  }
  // The constructor's two allocations: the weights, gradients and backward scratch (plan_), and
  // the layer scratch the micro-batches share (rc_plan_).
  void allocate_stage_buffers();
  void allocate_layer_scratch();
  // Llama with kv heads replicated over TP ranks: sums this layer's kv_w (and kv_b) gradient over them.
  void sum_replicated_kv_grads(const LayerParams& p);
  float* kv_bias_grad(const LayerParams& p) const;  // kv_b's gradient slot (kvgrad_'s when replicated), or nullptr
  // A bias the layer may lack (offset -1: none), and its gradient in a pass that takes weight gradients.
  Tensor bias(int64_t offset, int64_t n) const { return offset >= 0 ? W(offset, n) : Tensor(); }
  float* bgrad(int64_t offset) const { return offset >= 0 ? wgrad(offset) : nullptr; }
  // The model's gated unit on [n, 2F] gate|up rows: SwiGLU, or GPT-OSS's clamped one (activation_clamp).
  void glu_forward(const Tensor& out, const Tensor& gate_up, int64_t n, int64_t F);
  void glu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t n, int64_t F);
  // The attention core (the kernels', or ring attention under context parallel).
  // Layer i's (local index) window and sinks.
  kernels::Kernels::AttentionMask attention_mask(int64_t i) const;
  void attention_forward(const LayerActs& x, int64_t i);
  void attention_backward(const Tensor& dqkv, const LayerActs& x, int64_t i);
  // Learned positions of the local rows x [N, C] (added; their gradient accumulated).
  void add_positions(const Tensor& x);
  void positions_backward(const Tensor& dx);
  // RoPE on the queries and keys of qkv [N, 3A] at the local rows' positions.
  void rotary(const Tensor& qkv, bool inverse);
  // RoPE on `heads` heads of hd at the start of each local row of `row` elements (x: [N, row]).
  void rope_rows(const Tensor& x, int64_t heads, int64_t hd, int64_t row, bool inverse);
  // Multi-head latent attention (mla_layer.cpp): from the norm output ln1 [N, C] to the
  // attention's qkv and on to the output projection's partial sums in out; the backward from the
  // projection's output gradient dout [N, C] to the input gradient in dtmp_ (partial over tp).
  void mla_attention_forward(const LayerActs& x, int64_t i, const Tensor& ln1, const Tensor& out);
  void mla_attention_backward(const LayerActs& x, int64_t i, const Tensor& dout);
  Tensor mla_ = {};              // [N, mla_scratch_width] MLA scratch (forward's rope, backward's gradients)
  float* mlagrad_ = nullptr;     // tp > 1: the replicated MLA weights' gradients of one layer, summed over TP

  kernels::Kernels& k_;
  ParamLayout layout_;
  int64_t B_, T_;
  comm::Communicator* tp_;
  bool sp_ = false;
  kernels::DType dt_;
  std::function<void(int64_t, int64_t)> grad_hook_;
  std::function<void(int64_t, int64_t)> weights_hook_;
  UnitStorage* storage_ = nullptr;
  bool ext_w_ = false, ext_g_ = false;  // weights / gradients live in storage_
  BufferPlan plan_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  Tensor w_;                  // the weights in the compute dtype (params_ itself in fp32)
  // Backward scratch (compute dtype), shared by all layers and micro-batches.
  Tensor dres_;               // [Nl,C] residual-stream gradient
  Tensor dtmp_;               // [N,C] input gradient of a linear before the LayerNorm backward
  Tensor dbig_;               // [N, max(3C, F)/tp]
  Tensor datty_;              // [N, C/tp]
  float* dattn_ = nullptr;    // attention backward scratch
  // Sequence-parallel scratch (allocated only when sp_).
  Tensor full_;               // [N,C] gathered norm output or gradient / row-parallel partial output
  Tensor pack_;               // [N,C] rows reordered rank-major for the collectives (B > 1)
  Tensor lnout_;              // [N/tp,C] summed input gradient of the local rows
  float* lngrad_ = nullptr;   // [4C] LayerNorm weight/bias gradients of one layer, summed over TP
  // Llama scratch (allocated only for the Llama family).
  Tensor dmlp_;               // [N, F/tp] gradient of the SwiGLU output
  Tensor dkv_;                // [N, kv_local] gradient of the keys and values
  Tensor dtmp2_;              // [N,C] input gradient of the query projection
  float* kvgrad_ = nullptr;   // [kv_heads * kv_w size] replicated kv_w gradients, placed by kv head
  float* qkgrad_ = nullptr;   // tp > 1: [2 hd] QK-norm weight gradients of one layer, summed over TP
  // QK-norm (llama_layer.cpp): the per-head RMSNorm of q [N, A] and of the keys in kv [N, KV]
  // (forward, in place), and its backward on dq and dkv (in place, weight gradients summed
  // over the tp ranks' heads).
  void qk_norm_forward(const LayerActs& x, const LayerParams& p);
  void qk_norm_backward(const LayerActs& x, const LayerParams& p, const Tensor& dq, const Tensor& dkv);
  // Layer scratch: the activation views micro-batches do not keep (selective recomputation: the
  // probabilities; full: a whole layer's; Llama: q and kv before RoPE), in their own allocation
  // so their bytes are known.
  Recompute rc_ = Recompute::None;
  bool split_ = false;
  bool weights_now_ = true;  // the running backward computes the weight gradients (not split)
  BufferPlan rc_plan_;
  LayerActs rc_acts_{};
  ContextSplit ctx_;
  std::unique_ptr<RingAttention> ring_;
  // Mixture-of-experts scratch (allocated only when the stage holds a MoE layer).
  Tensor moe_logits_;         // [N, E] router logits (forward), their gradient (backward)
  float* moe_f32_ = nullptr;  // [N, E] the same in fp32, for the host
  Tensor moe_dys_, moe_dh_, moe_dhpre_, moe_dxs_;  // [Nk, C], [R, F], [R, F_in], [Nk, C]
  Tensor moe_dyr_, moe_dxr_;  // [R, C] received rows' gradients (moe_dys_, moe_dxs_ without ep)
  Tensor moe_yg_, moe_dyg_;   // etp > 1: [etp R, C] the experts' partial outputs (forward) or input
                              // gradients (backward), and the gathered output gradients
  float* moe_counts_ = nullptr;  // [(3 + etp) ep E/ep] row counts exchanged (int32): sent, received, gathered over etp
  Tensor moe_dx_;             // [N, C] the router's input gradient
  Tensor shared_out_;         // [N, C] the shared experts' output (forward) and input gradient (backward): partial sums over tp
  float* moe_dots_ = nullptr; // [Nk] combine-weight gradients, expert order
  mutable MoeRouting rc_route_;  // the routing of the layer scratch (full recomputation; micro-batches point here)
};

}  // namespace trident::nn
