// Parameter layout of a model shard (GPT-2 or Llama family): one flat buffer, named views into
// it (llm.c style).
//
// A Shard describes what one device holds:
//   - layers [first_layer, last_layer) of the model (a pipeline stage; all layers when pp = 1),
//   - the embeddings (wte, and wpe for GPT) when it holds the input (first stage),
//   - the final norm and the LM head when it holds the output (last stage). GPT ties the head
//     to wte: a stage holding both uses one wte; a last stage without the input holds its own
//     copy of wte (the parallel trainer keeps the two copies equal by summing their gradients).
//     Llama's head is its own tensor (head_w, untied) on the last stage,
//   - a tensor-parallel slice: tp_size, tp_rank. Sharded shapes: heads/tp (query columns and the
//     attention-projection rows), kv_heads/tp (key/value heads; when tp exceeds kv_heads each
//     rank holds one kv head, replicated over tp/kv_heads ranks as Megatron does), ffn/tp (MLP
//     columns, MLP-projection rows), padded vocab/tp (wte and head rows). Replicated: norms, wpe,
//     row-parallel biases (attn_proj_b, fc_proj_b).
//
// Flat order (so a per-layer bucket is contiguous, and a stage's buffer is just its layers):
//   GPT:   [wte][wpe] | per layer: ln1_w ln1_b qkv_w qkv_b attn_proj_w attn_proj_b ln2_w ln2_b fc_w
//          fc_b fc_proj_w fc_proj_b | [lnf_w lnf_b][wte copy for the head when the shard has no input]
//   Llama: [wte] | per layer: ln1_w q_w kv_w [q_norm_w k_norm_w] [sinks] attn_proj_w ln2_w gate_up_w
//          fc_proj_w | [per MTP layer: enorm_w hnorm_w eh_proj_w mtp_norm_w, then a layer's tensors]
//          [lnf_w head_w][head_wte: wte's copy for the MTP layers when the shard has no input] (q_norm_w, k_norm_w [hd]: QK-norm, Qwen3; sinks [heads / tp]:
//          GPT-OSS's attention sinks, one logit per head, split over tp with the heads)
//   MLA (DeepSeek-V3, Llama family): q_a_w [q_lora, C] q_a_norm_w [q_lora] q_b_w [heads (nope+rope),
//          q_lora] (or q_w [heads (nope+rope), C] without q_lora_rank), kv_a_w [kv_lora + rope, C]
//          (latent rows, then the shared rope key's) kv_a_norm_w [kv_lora] kv_b_w [heads (nope+v),
//          kv_lora] (per head its nope key rows then its value rows) instead of q_w kv_w;
//          attn_proj_w [C, heads v]. The a's and their norms are replicated over tp (gradients
//          summed over it), q_b_w, kv_b_w and attn_proj_w split by head.
// A mixture-of-experts layer (Shard::moe_layer) replaces the MLP's tensors with router_w [E, C]
// and the experts' MLPs stacked expert by expert along the rows, under "experts.": GPT
// experts.fc_w [E F, C], experts.fc_b [E F], experts.fc_proj_w [E C, F], experts.fc_proj_b [E C];
// Llama experts.gate_up_w [E 2F, C] (each expert's gate rows then up rows), experts.fc_proj_w
// [E C, F] (F = expert_ffn_hidden). Each rank holds its expert-grid position's experts (ep) and
// slices of them (etp: F / etp rows of fc_w and fc_b, gate and up rows of gate_up_w, columns of
// fc_proj_w, each expert's block in turn; fc_proj_b whole); under expert parallelism a shard stacks its E/ep experts only (rows
// ep_rank x its rows onward of the logical tensor). Shared experts, where the model has them,
// come between the router and the routed experts as one MLP of Fs = shared x expert_ffn_hidden
// columns, split over tp like the dense MLP and reduced over dp like it: GPT shared.fc_w [Fs, C],
// shared.fc_b [Fs], shared.fc_proj_w [C, Fs], shared.fc_proj_b [C]; Llama shared.gate_up_w
// [2 Fs, C] (gate rows then up rows), shared.fc_proj_w [C, Fs].
// Llama-family biases where the model has them (GPT-OSS): q_b kv_b after kv_w, attn_proj_b after
// attn_proj_w, gate_up_b / fc_proj_b after their weights; router_b after router_w, and
// experts.gate_up_b [E 2F] after experts.gate_up_w, experts.fc_proj_b [E C] last.
// Each tensor's offset is rounded up to 16 floats (64 bytes) for aligned vector loads.
// Gradients and the AdamW moments use the same layout (same offsets) in their own buffers.
//
// Weight shapes follow nn.Linear: [out, in]. GPT's QKV weight rows are ordered [q heads | k heads
// | v heads] of THIS shard (a tp slice takes heads [tp_rank*nh/tp, (tp_rank+1)*nh/tp) of each).
// Llama's q_w rows are this shard's query heads; kv_w rows its key heads then its value heads;
// gate_up_w rows its slice of the gate projection then the same slice of the up projection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/vocab_padding.h"
#include "runtime/nn/moe_routing.h"

namespace trident::nn {

struct Shard {
  ModelSpec model;       // the whole model
  int64_t first_layer = 0;
  int64_t last_layer = -1;  // exclusive; -1 = model.layers
  bool has_input = true;    // wte + wpe, embedding forward
  bool has_output = true;   // final LayerNorm + LM head + loss
  int64_t tp_size = 1;
  int64_t tp_rank = 0;
  MoeOptions moe;           // router settings (mixture-of-experts models)
  int64_t ep_size = 1;      // expert parallel: this rank holds experts [ep_rank E/ep, (ep_rank+1) E/ep)
  int64_t ep_rank = 0;
  // Expert tensor parallel (Megatron-Core's expert grid): each of this rank's experts is split over
  // etp ranks, FC1 by columns (its F / etp slice etp_rank, column-parallel), FC2 by rows
  // (row-parallel; its output bias replicated over etp). etp 1: whole experts. Under tp > 1 each
  // tp rank dispatches its own tokens (the EP group may mix tp and dp ranks: MoE parallel folding).
  int64_t etp_size = 1;
  int64_t etp_rank = 0;

  static Shard whole(const ModelSpec& m) { Shard s; s.model = m; s.last_layer = m.layers; return s; }
  int64_t end_layer() const { return last_layer < 0 ? model.layers : last_layer; }
  int64_t num_layers() const { return end_layer() - first_layer; }
  int64_t C() const { return model.hidden; }
  int64_t heads_local() const { return model.heads / tp_size; }
  // hidden / heads unless the model sets it (Qwen3); MLA: the query/key head, nope + rope (values
  // are zero-padded to it in the attention kernels, see mla_layer.cpp).
  int64_t head_dim() const {
    return model.is_mla() ? model.qk_nope_head_dim + model.qk_rope_head_dim : model.head_dim();
  }
  // Multi-head latent attention (DeepSeek-V2/V3): this rank's heads' kv_b rows (nope keys and
  // values, head by head) and the attention output the projection reads (heads x v_head_dim).
  bool mla() const { return model.is_mla(); }
  int64_t mla_kv_b_local() const { return heads_local() * (model.qk_nope_head_dim + model.v_head_dim); }
  int64_t out_local() const { return mla() ? heads_local() * model.v_head_dim : attn_local(); }
  int64_t attn_local() const { return heads_local() * head_dim(); }  // heads x head_dim / tp (C / tp by default)
  int64_t ffn_local() const { return model.ffn_hidden / tp_size; }
  // The vocabulary is padded to a multiple of 128 x tp (core/vocab_padding.h): wte and the head
  // hold vocab_local() rows, of which the first vocab_valid() are tokens; the rest are zero rows
  // whose logits get no probability and no gradient (the loss kernels mask them).
  int64_t vocab_padded() const { return padded_vocab(model.vocab, tp_size); }
  int64_t vocab_local() const { return vocab_padded() / tp_size; }
  int64_t vocab_offset() const { return tp_rank * vocab_local(); }
  int64_t vocab_valid() const {
    const int64_t left = model.vocab - vocab_offset();
    return left <= 0 ? 0 : (left < vocab_local() ? left : vocab_local());
  }
  bool llama() const { return model.family == ModelFamily::Llama; }
  // Grouped-query attention: key/value heads this rank holds, the first one's index, and how
  // many TP ranks hold the same kv heads (1 unless tp exceeds kv_heads). GPT: kv_heads = heads.
  int64_t kv_heads() const { return model.kv_heads > 0 && !model.is_mla() ? model.kv_heads : model.heads; }
  int64_t kv_heads_local() const { return kv_heads() >= tp_size ? kv_heads() / tp_size : 1; }
  int64_t kv_replicas() const { return kv_heads() >= tp_size ? 1 : tp_size / kv_heads(); }
  int64_t kv_head_first() const { return tp_rank / kv_replicas() * kv_heads_local(); }
  int64_t kv_local() const { return 2 * kv_heads_local() * head_dim(); }  // width of this rank's K and V
  // Mixture of experts: whether global layer l has a router and experts (every moe_layer_freq-th
  // layer after the model's moe_dense_layers), whether this stage has one, the experts this rank
  // holds and one expert's MLP width.
  // A multi-token-prediction layer (global index model.layers + j) is of the last layer's kind
  // (Megatron-Core builds it from the decoder's last layer spec; DeepSeek-V3's is a MoE layer).
  bool moe_layer(int64_t l) const { return model.is_moe_layer(l < model.layers ? l : model.layers - 1); }
  bool has_moe() const {
    for (int64_t l = first_layer; l < end_layer(); ++l)
      if (moe_layer(l)) return true;
    return mtp_count() > 0 && moe_layer(model.layers);
  }
  // Multi-token prediction (DeepSeek-V3, ModelSpec::mtp_layers): its layers sit on the stage
  // holding the output, after the model's layers (global indices model.layers onward).
  int64_t mtp_count() const { return has_output ? model.mtp_layers : 0; }
  int64_t experts_local() const { return model.experts / ep_size; }
  int64_t expert_ffn() const { return model.expert_ffn_hidden; }
  int64_t expert_ffn_local() const { return model.expert_ffn_hidden / etp_size; }  // this rank's slice of it
  // Shared experts (every token passes them besides its top-k): one MLP of shared x expert-ffn
  // columns, split over tp like the dense MLP; this rank's columns.
  bool has_shared_experts() const { return model.is_moe() && model.shared_experts > 0; }
  int64_t shared_ffn_local() const { return model.shared_experts * model.expert_ffn_hidden / tp_size; }
};

// Whether a last stage without the input holds a copy of wte whose gradient the trainer sums
// with the first stage's: GPT's tied head, or the embedding the MTP layers read.
inline bool embedding_copies(const ModelSpec& m) { return m.tied_embeddings() || m.mtp_layers > 0; }

// Kind of a parameter tensor: decides weight decay (matrices and embeddings decay; biases and
// LayerNorm parameters do not) and how the dist runtime treats it under TP.
enum class ParamKind { Embedding, Matrix, Bias, Norm };

struct TensorView {
  std::string name;     // "layers.3.qkv_w", "wte", "head_wte", "lnf_w"
  int64_t offset = 0;   // in floats, into the flat buffer
  int64_t rows = 0, cols = 0;  // cols = 1 for vectors
  ParamKind kind = ParamKind::Matrix;
  bool tp_sharded = false;  // differs between tp ranks (false: replicated across the TP group)
  int64_t tp_copies = 1;    // TP ranks holding these same values: 1 when sharded, tp when replicated,
                            // tp/kv_heads for Llama's kv_w when tp exceeds the kv heads
  bool expert = false;      // one of the experts' stacked tensors: split over ep, reduced over EDP
  int64_t etp_copies = 1;   // experts: etp ranks holding these same values (etp for FC2's bias, else 1)
  // Whether this rank holds the copy that counts (once per logical value: norms, checkpoints): the
  // dense tensors' first tp rank of their copies, the experts' first etp rank of theirs.
  bool primary(const Shard& s) const { return expert ? s.etp_rank % etp_copies == 0 : s.tp_rank % tp_copies == 0; }
  int64_t size() const { return rows * cols; }
  bool decays() const { return kind == ParamKind::Embedding || kind == ParamKind::Matrix; }
};

// Offsets of one transformer layer's tensors.
// Llama: q_w and kv_w instead of qkv_w, fc_w is gate_up_w, no biases (-1), ln*_w are RMSNorms.
struct LayerParams {
  int64_t ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, attn_proj_w = -1, attn_proj_b = -1, ln2_w = -1, ln2_b = -1,
          fc_w = -1, fc_b = -1, fc_proj_w = -1, fc_proj_b = -1;
  int64_t q_w = -1, kv_w = -1;
  // Llama-family biases (GPT-OSS, Qwen2): q_b [A] and kv_b [kv rows] split with their heads;
  // attn_proj_b [C] and fc_proj_b [C] (row-parallel, replicated), fc_b the MLP's gate_up_b [2F];
  // router_b [E] (replicated like router_w).
  int64_t q_b = -1, kv_b = -1, router_b = -1;
  int64_t q_norm_w = -1, k_norm_w = -1;  // QK-norm: [hd] each, replicated over tp
  int64_t sinks = -1;                    // attention sinks: [heads / tp], this rank's heads'
  // Multi-token prediction layers: RMSNorms of the embedding and of the previous depth's hidden
  // state [C], eh_proj [C, 2C] (columns: the embedding's, then the hidden state's; replicated
  // over tp) and the depth's final norm before the shared head [C].
  int64_t enorm_w = -1, hnorm_w = -1, eh_proj_w = -1, mtp_norm_w = -1;
  // Multi-head latent attention (q_w without q_lora_rank; kv_w -1): the replicated down
  // projections and their RMSNorms, the column-parallel (by head) up projections.
  int64_t q_a_w = -1, q_a_norm_w = -1, q_b_w = -1, kv_a_w = -1, kv_a_norm_w = -1, kv_b_w = -1;
  int64_t router_w = -1;  // mixture of experts: fc_* are then the stacked experts' tensors
  int64_t shared_fc_w = -1, shared_fc_b = -1, shared_proj_w = -1, shared_proj_b = -1;  // shared experts (or -1)
  bool moe = false;
  int64_t begin = 0, end = 0;  // [begin, end) of this layer in the flat buffer
};

class ParamLayout {
 public:
  explicit ParamLayout(const Shard& shard);

  const Shard& shard() const { return shard_; }
  int64_t total() const { return total_; }  // floats in the flat buffer
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  // Where element (r, c) of a shard tensor sits in the whole model's tensor: its logical name
  // (the GPT head's copy is "wte"), row and column there, and that tensor's shape.
  struct Global {
    std::string name;
    int64_t row = 0, col = 0, rows = 0, cols = 0;
  };
  Global global(const TensorView& view, int64_t r, int64_t c) const { return global_index(shard_, view, r, c); }
  static Global global_index(const Shard& shard, const TensorView& view, int64_t r, int64_t c);

  // Offsets (-1 when the shard does not hold the tensor).
  int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1;
  int64_t head_wte = -1;  // GPT: = wte when the shard holds the input, else its own copy
  int64_t head_w = -1;    // Llama: the untied output embedding
  int64_t head() const { return head_w >= 0 ? head_w : head_wte; }  // the LM head's weight
  // The input embedding the MTP layers read: wte, or its copy on a last stage without the input.
  int64_t embedding() const { return wte >= 0 ? wte : head_wte; }
  // Local index i: the stage's layers [0, num_layers()), then its MTP layers (mtp_count()).
  const LayerParams& layer(int64_t local_index) const { return layers_[local_index]; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()) - shard_.mtp_count(); }
  int64_t all_layers() const { return static_cast<int64_t>(layers_.size()); }

  // Units of the flat buffer, in order, tiling [0, total()): everything before the first layer
  // (the embeddings), each layer up to the next one's start, everything after the last (final
  // norm and head). ZeRO-2/3 reduce, shard and gather each unit on its own (FSDP's units); a
  // stage's code touches the weights or gradients of one unit at a time, except the tied GPT
  // head, which reads the embedding unit after the output unit's norm.
  struct Unit {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
  };
  const std::vector<Unit>& units() const { return units_; }
  int64_t unit_of(int64_t offset) const;  // the unit holding flat element `offset`
  // The experts' part of each MoE layer, ascending: [its first expert tensor, the layer's end)
  // (the experts' tensors close a MoE layer, see above). Empty for a dense model.
  const std::vector<Unit>& expert_ranges() const { return expert_ranges_; }

 private:
  int64_t add(const std::string& name, int64_t rows, int64_t cols, ParamKind kind, bool tp_sharded);
  void add_experts(LayerParams& lp, const std::string& prefix);
  Shard shard_;
  int64_t total_ = 0;
  std::vector<TensorView> tensors_;
  std::vector<LayerParams> layers_;
  std::vector<Unit> units_;
  std::vector<Unit> expert_ranges_;
  void make_units();
};

// Where a stage's weights and gradients live when the trainer holds them unit by unit instead of
// in the stage's whole flat buffers (ZeRO-2: gradients; ZeRO-3: weights too). A pointer it
// returns is the unit's first element (flat offset units()[u].begin) and stays valid until the
// stage asks for another unit's weights (gradients: until the unit's reduction, which the
// grad-ready hook starts).
class UnitStorage {
 public:
  virtual ~UnitStorage() = default;
  virtual bool holds_grads() const = 0;
  virtual bool holds_weights() const = 0;
  virtual float* unit_grads(int64_t unit) = 0;          // fp32, accumulated into (zeroed when first handed out)
  virtual const float* unit_weights(int64_t unit) = 0;  // fp32, the whole unit (gathered)
};

}  // namespace trident::nn
