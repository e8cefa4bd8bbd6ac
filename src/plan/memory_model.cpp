#include "plan/memory_model.h"

#include <algorithm>

#include "plan/context_parallel.h"
#include "plan/cost_model.h"
#include "plan/mixture_of_experts.h"

namespace trident::plan {

StateBytes state_bytes(Precision precision, int grad_bits, const RecipeSettings& r) {
  const double state = r.optimizer_state_bits / 8.0;  // one optimizer state element
  if (precision == Precision::FP32) return {4, 4, 2 * state, 4};  // weights, gradients, Adam moments
  StateBytes b{2, grad_bits / 8.0, 3 * state, 2};      // 16-bit weights, main grads, master + moments
  if (quantized_gemms(precision)) {
    // Transformer Engine keeps the bf16 weights and their quantised copies cached across
    // micro-batches (fp8: 1 B; mxfp8: rowwise and columnwise, 2 x (1 + 1/32) B; nvfp4:
    // 2 x (1/2 + 1/16) B); with FP8 primary weights (fp8 only) just the FP8 ones, all-gathered
    // as FP8 (the master copy stays in the optimizer).
    b.weights = r.fp8_params ? 1 : 2 + double(quantized_copies(precision)) * quantized_element_bytes(precision);
    b.gathered = r.fp8_params ? 1 : 2;
  }
  return b;
}
StateBytes state_bytes(const ExecutionSpec& e) { return state_bytes(e.precision, e.grad_bits, e.recipe); }

StageParams stage_params(const ModelSpec& m, int64_t tp, int64_t pp, int64_t layers_on_stage, bool first,
                         bool last, int64_t ep, int64_t etp) {
  return stage_params(m, count_parameters(m), tp, pp, layers_on_stage, first, last, ep, etp);
}

StageParams stage_params(const ModelSpec& m, const ParamCount& pc, int64_t tp, int64_t pp, int64_t layers_on_stage,
                         bool first, bool last, int64_t ep, int64_t etp) {
  const double t = double(tp);
  const double vocab = double(padded_vocab(m.vocab, tp));
  StageParams sp;
  // Matrices and their biases are split over the TP group; the norms are replicated.
  sp.layer_params = double(layers_on_stage) * (double(pc.attention_per_layer + pc.mlp_per_layer) / t +
                                               double(pc.norms_per_layer));
  if (m.is_moe()) {
    const MoeParams mp = moe_params_per_layer(m, pc, tp, ep, etp);
    sp.layer_params = double(layers_on_stage) * mp.dense;
    sp.expert_params = double(layers_on_stage) * mp.experts;
  }
  if (first) sp.embedding_params = vocab * m.hidden / t + double(pc.position_embedding);
  if (last) {
    sp.output_params = double(pc.final_norm);
    // Untied output layer always; a tied one needs its own copy when it lives on another stage.
    if (!m.tied_embeddings() || pp > 1) sp.output_params += vocab * m.hidden / t;
    if (m.mtp_layers > 0) {
      // MTP modules after the last layer (Megatron's place): each a layer like the model's (the
      // MoE layers' mean split when it has them), its 2h -> h projection over tp and three norms.
      const double k = double(m.mtp_layers), h = double(m.hidden);
      if (m.is_moe()) {
        const MoeParams mp = moe_params_per_layer(m, pc, tp, ep);
        sp.output_params += k * mp.dense;
        sp.expert_params += k * mp.experts;
      } else {
        sp.output_params += k * (double(pc.attention_per_layer + pc.mlp_per_layer) / t + double(pc.norms_per_layer));
      }
      sp.output_params += k * (2 * h * h / t + 3 * h);
    }
  }
  return sp;
}

LayerActivations layer_activations(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t etp) {
  const double sbh = double(m.seq_len) * e.micro_batch_size * m.hidden;
  const double sbf = double(m.seq_len) * e.micro_batch_size * m.ffn_hidden;
  const double sbkv = double(m.seq_len) * e.micro_batch_size * m.kv_dim();
  const double sbq = double(m.seq_len) * e.micro_batch_size * m.q_dim();  // Q (= sbh unless head_dim is the model's own)
  const double sbv = double(m.seq_len) * e.micro_batch_size * m.v_dim();  // the projection input
  // MLA keeps the query and kv latents (and the rope key) for its up projections' backward,
  // whole on every tp rank as the down projections that write them.
  const double latents = m.is_mla() ? double(m.seq_len) * e.micro_batch_size *
                                          double(m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)
                                    : 0.0;
  const double as2b = double(m.heads) * m.seq_len * m.seq_len * e.micro_batch_size;
  const double t = double(tp);
  const bool dropout = m.has_dropout();
  const double scale = e.precision == Precision::FP32 ? 2.0 : 1.0;  // Table 2 assumes 16-bit
  // Korthikanti Table 2 term by term. Outside the TP region: both norm inputs (4sbh), QKV and MLP
  // inputs (4sbh), two dropout masks (2sbh, with dropout: GPT's default).
  const double outside = (dropout ? 10 : 8) * sbh;
  // Inside (split by t): Q, K, V, projection input, MLP internals (GELU in + out 4sbf; SwiGLU
  // 6sbf fused, 8sbf eager: mlp_activation_width). A MoE layer's routed experts hold their own
  // share (`whole`, already per GPU: moe_mlp_activation_elements), the shared experts' and dense
  // layers' are split over tp.
  MoeActivationElements mlp{mlp_activation_width(m, e.recipe) * sbf, 0, sbf, 0};
  if (m.is_moe()) mlp = moe_mlp_activation_elements(m, e.recipe, double(m.seq_len) * e.micro_batch_size, tp, etp);
  // Grouped-query attention: flash kernels read each K and V head for its group of query heads;
  // unfused attention repeats K and V to every query head first (Megatron's repeat_interleave, the
  // runtime's kernels) and its matrix products keep the repeated ones.
  const bool flash = e.attention == AttentionKind::Flash;
  const double kv_held = flash ? sbkv : sbq;
  const double inside = 2 * sbq + 4 * kv_held + 2 * sbv + mlp.split;
  // Attention scores: softmax output, dropout mask and output (5as^2b; 2as^2b without dropout).
  // Flash attention never stores them, only the softmax statistics (one fp32 per row and head).
  const double scores = flash ? 0.0 : (dropout ? 5 : 2) * as2b;
  const double softmax_stats = flash ? 4.0 * double(m.heads) * m.seq_len * e.micro_batch_size : 0.0;  // fp32 bytes
  // FP8 (Transformer Engine): for the weight-gradient GEMM, TE's Linear and LayerNormLinear keep
  // the FP8 (1-byte) cast of each FP8 GEMM's input (saved_inputmat is the FP8 tensor), not the
  // 16-bit one. So the QKV and MLP inputs (the norm outputs, sbh each, outside the TP region) and
  // the MLP-out input (sbf; a routed expert's per token copy, whole) are held as FP8 only: no
  // other kernel's backward reads them (the norms and the activation keep their inputs). The
  // projection input (sbh) is held twice: the attention's backward reads it in 16-bit. Full
  // recomputation rebuilds them with the rest.
  // mxfp8 and nvfp4 keep the same inputs in their own format (only the columnwise copy the
  // weight gradient reads, with its block scales: quantized_element_bytes).
  const bool fp8 = quantized_gemms(e.precision);
  const double fp8_outside = fp8 ? 2 * sbh : 0.0;
  const double fp8_inside = fp8 ? sbv + mlp.fc2_split : 0.0;
  // The routed experts' FC1 input likewise: TE's GroupedLinear saves the quantised rows alone, and
  // the dispatcher's permute keeps only its index map (Megatron-Core moe_utils.permute), so the
  // 16-bit permuted rows are freed after the FC1 forward.
  const double fp8_whole = fp8 ? mlp.fc2_whole + mlp.fc1_whole : 0.0;
  LayerActivations a;
  const double outside_held = e.sequence_parallel ? outside / t : outside;
  const double fp8_elements = (e.sequence_parallel ? fp8_outside / t : fp8_outside) + fp8_inside / t + fp8_whole;
  const double fp8_copies = quantized_element_bytes(e.precision) * fp8_elements;
  // The 16-bit tensors (2 bytes) of every copy but the projection input's.
  const double fp8_given_up = fp8 ? 2 * (fp8_elements - sbv / t) : 0.0;
  a.full_layer_bytes =
      scale * (outside_held + (inside + softmax_stats) / t + mlp.whole + 2 * latents + scores / t) + fp8_copies -
      fp8_given_up;
  // --recompute-modules (Megatron-Core's checkpoints, each dropping its module's output and
  // keeping its inputs), per module as this layer holds it; quantised copies under FP8 GEMMs.
  const double q = fp8 ? quantized_element_bytes(e.precision) : 2.0, sp = e.sequence_parallel ? t : 1.0;
  ModuleDrop& d = a.module_drop;
  d.core_attn = scale * scores / t;
  // mla_up_proj (MLASelfAttention's qkv_up_checkpoint, discarded after the core attention): the up
  // projections' and the rope's outputs Q, K, V that the core attention saved; the latents stay.
  d.mla_up_proj = m.is_mla() ? scale * (2 * sbq + 4 * kv_held) / t : 0.0;
  // moe_act (TEGroupedMLP's activation_checkpoint): the routed experts' activation output, the FC2
  // input as FC2 holds it (its quantised copy under FP8 GEMMs).
  d.moe_act = scale * q * mlp.fc2_whole;
  d.moe_act_written = scale * 2 * mlp.fc2_whole;
  // layernorm (TransformerLayer's input and pre-MLP norm checkpoints): both norms' outputs, the QKV
  // and MLP inputs (4sbh at 16 bits), as the GEMMs after them hold them.
  d.layernorm = scale * q * 2 * sbh / sp;
  d.layernorm_written = scale * 4 * sbh / sp;
  // mlp (TransformerLayer's MLP checkpoint; Megatron leaves a MoE layer's to `moe`): a dense layer's
  // MLP internals beyond its input (activation width - 2 at 16 bits, the FC2 input as held).
  const double dense_share = 1 - moe_layer_share(m);
  d.mlp = dense_share * scale * ((mlp_activation_width(m, e.recipe) - 2) * sbf + q * sbf) / t;
  d.mlp_act_written = dense_share * scale * 2 * sbf / t;
  if (fp8) {
    d.fp8_moe_act = d.moe_act, d.fp8_layernorm = d.layernorm;
    d.fp8_mlp = dense_share * scale * q * sbf / t;
  }
  switch (e.recompute) {
    case Recompute::None:
      a.attention_scores_bytes = scale * scores / t;
      a.bytes = a.full_layer_bytes;
      a.fp8_copy_bytes = fp8_copies;
      a.fp8_given_up_bytes = fp8_given_up;
      break;
    case Recompute::Selective:
      a.bytes = scale * (outside_held + (inside + softmax_stats) / t + mlp.whole + 2 * latents) + fp8_copies - fp8_given_up;
      a.fp8_copy_bytes = fp8_copies;
      a.fp8_given_up_bytes = fp8_given_up;
      break;
    case Recompute::Full:
      a.bytes = scale * 2 * sbh / (e.sequence_parallel ? t : 1.0);
      break;
  }
  if (e.recompute == Recompute::Selective && e.recompute_modules.any()) {
    const RecomputeModules& r = e.recompute_modules;
    a.bytes = a.full_layer_bytes - (r.core_attn ? d.core_attn : 0) - (r.mla_up_proj ? d.mla_up_proj : 0) -
              (r.moe_act ? d.moe_act : 0) - (r.layernorm ? d.layernorm : 0) - (r.mlp ? d.mlp : 0);
    a.fp8_copy_bytes -= (r.moe_act ? d.fp8_moe_act : 0) + (r.layernorm ? d.fp8_layernorm : 0) + (r.mlp ? d.fp8_mlp : 0);
  }
  if (e.recompute != Recompute::None) a.attention_scores_bytes = scale * scores / t;  // still the working set
  // ZB-H1 defers the matrix gradients to the W pass, which needs each linear's output gradient:
  // the layer output's and the attention output's (2sbh, 4sbh bytes at 16-bit) are kept besides
  // the activations; the other linears' output gradients overwrite inputs the backward is done with.
  // A MoE layer also keeps its router logits' gradient (sbE, replicated over tp) for the router's
  // weight gradient; its experts' output gradients overwrite their outputs.
  if (e.schedule == ScheduleKind::ZeroBubbleH1 && e.recompute != Recompute::Full)
    a.deferred_grad_bytes = scale * 4 * sbh / (e.sequence_parallel ? t : 1.0) +
                            scale * 2 * double(m.seq_len) * e.micro_batch_size * double(m.experts) * moe_layer_share(m);
  a.bytes += a.deferred_grad_bytes;
  return a;
}

double chunks_in_flight(ScheduleKind schedule, int64_t stage, int64_t pp, int64_t v, int64_t m) {
  switch (schedule) {
    case ScheduleKind::GPipe: return double(m);
    case ScheduleKind::OneFOneB: return double(std::min(m, pp - stage));
    // ZB-H1 keeps a micro-batch's activations until its weight-gradient pass, which stage i runs
    // i backwards late: min(p-i-1, m) warm-up forwards + min(i, m) waiting for W + the one in
    // flight, at most m; min(m, p) on every stage (the schedule lists agree: plan tests).
    case ScheduleKind::ZeroBubbleH1: return double(std::min(m, pp));
    case ScheduleKind::Interleaved:
      return double(std::min(m * v, 2 * (pp - stage - 1) + (v - 1) * pp + 1));
  }
  return double(m);
}

double first_chunk_micro_batches_in_flight(ScheduleKind schedule, int64_t pp, int64_t v, int64_t m) {
  if (schedule != ScheduleKind::Interleaved) return chunks_in_flight(schedule, 0, pp, 1, m);
  return double(std::min(m, 2 * pp));
}

std::vector<StageMemory> stage_memory(const ModelSpec& full, const ExecutionSpec& e, const MemoryInputs& in) {
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;
  const auto layers = stage_layers(full.layers, in.pp, e);
  const StateBytes sb = state_bytes(e);
  const int64_t cp = std::max<int64_t>(in.cp, 1), ep = std::max<int64_t>(in.ep, 1);
  const ModelSpec m = per_rank_sequence(full, cp);  // activations: s / cp tokens per sequence
  const LayerActivations act = layer_activations(m, e, in.tp, in.etp);
  const int64_t micro = std::max<int64_t>(e.micro_batches(std::max<int64_t>(in.dp, 1)), 1);
  const double t = double(in.tp), d = double(std::max<int64_t>(in.dp, 1) * cp);
  // The ranks holding the same expert shard (Megatron's expert data parallel group).
  const double edp = double(Layout{in.tp, cp, std::max<int64_t>(in.dp, 1), in.pp, "", ep, in.etp}.size(Dim::EDP));
  const double sbh = double(m.seq_len) * e.micro_batch_size * m.hidden;
  const double el = e.precision == Precision::FP32 ? 4 : 2;
  const ParamCount pc = count_parameters(full);  // once for every stage
  // ZeRO-3's gathered layer (the per-layer terms do not depend on the sequence length): a MoE
  // layer's router, shared experts (split over tp) and local routed experts (whole over tp,
  // split over ep x etp) in place of the dense MLP, the larger of the two where both kinds exist.
  const double dense_layer = double(pc.attention_per_layer + pc.mlp_per_layer) / t + double(pc.norms_per_layer);
  const double moe_layer = full.is_moe() ? double(pc.attention_per_layer + pc.shared_experts_per_layer) / t +
                                               double(pc.norms_per_layer + pc.router_per_layer) +
                                               double(pc.routed_experts_per_layer) / double(ep * std::max<int64_t>(in.etp, 1))
                                         : 0.0;
  const double gathered_layer = std::max(full.is_moe() && moe_layer_share(full) >= 1 ? 0.0 : dense_layer, moe_layer);
  const double ring_bytes = cp_ring_buffer_bytes(full, e, in.tp, cp);
  const double vocab_h = double(padded_vocab(full.vocab, in.tp)) * double(full.hidden) / t;  // an output layer's params
  std::vector<StageMemory> out(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    StageMemory& s = out[i];
    const bool first = i == 0, last = i + 1 == layers.size();
    s.stage = int64_t(i);
    s.layers = layers[i];
    // The middle stages of a split mostly hold equal layers, and so equal parameters.
    const bool like_previous = i > 1 && !last && layers[i] == layers[i - 1];
    s.params = like_previous ? out[i - 1].params : stage_params(full, pc, in.tp, in.pp, layers[i], first, last, ep, in.etp);
    const double p = s.params.dense(), x = s.params.expert_params;
    // The embedding and the output layer are no Transformer Engine GEMMs (Megatron-Core's
    // VocabParallelEmbedding and tensor_parallel.ColumnParallelLinear output_layer): 16-bit weights
    // with no quantised copies (nor FP8 primary weights) under FP8 GEMMs.
    const double vocab_params = s.params.embedding_params + (last && (!full.tied_embeddings() || in.pp > 1) ? vocab_h : 0);
    const double plain_weights = quantized_gemms(e.precision) ? vocab_params * (sb.weights - 2) : 0.0;
    s.plain_weight_params = quantized_gemms(e.precision) ? vocab_params : 0.0;
    s.weights_bytes = (p * sb.weights - plain_weights) / (e.zero >= 3 ? d : 1.0);
    s.gradients_bytes = p * sb.gradients / (e.zero >= 2 ? d : 1.0);
    s.optimizer_bytes = p * sb.optimizer / (e.zero >= 1 ? d : 1.0);
    const double xw = x * sb.weights / (e.zero >= 3 ? edp : 1.0), xg = x * sb.gradients / (e.zero >= 2 ? edp : 1.0),
                 xo = x * sb.optimizer / (e.zero >= 1 ? edp : 1.0);
    s.expert_state_bytes = xw + xg + xo;
    s.weights_bytes += xw;
    s.gradients_bytes += xg;
    s.optimizer_bytes += xo;
    s.in_flight = chunks_in_flight(e.schedule, int64_t(i), in.pp, v, micro);
    s.per_layer_activation_bytes = act.bytes;
    s.per_layer_fp8_copy_bytes = act.fp8_copy_bytes;
    s.activations_bytes = s.in_flight * (double(layers[i]) / double(v)) * act.bytes;
    // Recomputing one layer in backward rebuilds its full activations for a moment.
    if (e.recompute == Recompute::Full) s.activations_bytes += act.full_layer_bytes;
    s.cp_ring_buffer_bytes = ring_bytes;
    s.activations_bytes += s.cp_ring_buffer_bytes;
    if (first) {
      // Embedding dropout mask (with dropout, 1 byte per element) of each micro-batch in flight through the
      // embedding's chunk: not every chunk in flight on the stage (interleaved: the others are later layers).
      s.embedding_in_flight = first_chunk_micro_batches_in_flight(e.schedule, in.pp, v, micro);
      s.embedding_activation_bytes = m.has_dropout()
                                         ? s.embedding_in_flight * sbh / (e.sequence_parallel ? t : 1.0)
                                         : 0;
      s.activations_bytes += s.embedding_activation_bytes;
    }
    if (last) {
      // fp32 logits of one micro-batch (4 s b V / t) plus the final norm's input.
      s.logits_bytes = 4 * double(m.seq_len) * e.micro_batch_size * double(padded_vocab(m.vocab, in.tp)) / t +
                       el * sbh / (e.sequence_parallel ? t : 1.0);
      // ZB-H1 defers the output layer's weight gradient too: every micro-batch in flight keeps them.
      if (e.schedule == ScheduleKind::ZeroBubbleH1) s.logits_bytes *= s.in_flight;
      // MTP: each module's layer activations and its own logits, for the micro-batch on the last chunk.
      s.logits_bytes *= double(1 + m.mtp_layers);
      s.activations_bytes += double(m.mtp_layers) * act.bytes;
      s.activations_bytes += s.logits_bytes;
    }
    s.overhead_bytes = in.overhead_bytes;
    if (e.zero >= 3 && in.dp > 1) {
      // ZeRO-3 / FSDP gathers each layer's weights (16-bit; fp32 when training in fp32; FP8 with
      // fp8_params) whole before using it, and the next one ahead (prefetch): two layers'
      // unsharded weights are resident besides the shards.
      s.gathered_weights_bytes = 2 * gathered_layer * sb.gathered;
    }
  }
  return out;
}

}  // namespace trident::plan
