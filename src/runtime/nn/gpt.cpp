// GPT-2 stage: its activations and its set-up (checks, buffers, scratch, initial weights; see gpt.h
// for the contract); forward and backward, layer by layer, are gpt_passes.cpp.
#include "runtime/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/problems.h"
#include "runtime/nn/init.h"

namespace trident::nn {

using kernels::DType;
using kernels::Kernels;

// ---------------------------------------------------------------- activations
namespace {
constexpr size_t kNone = size_t(-1);

// Which of a layer's activations a buffer holds: the attention probabilities, the layer's
// output (the next layer's input), everything else the backward reads (norm outputs and
// statistics, q/k/v, attention output, the residual after attention, the MLP's), and what only
// the forward needs (Llama's q and kv before the heads are repeated and rotated).
struct Keep {
  bool probs = true, internals = true, res_out = true, forward_only = false;
  bool split_gradients = false;  // d_out, d_mid of a split backward
};
struct LayerRegions {
  size_t ln1 = kNone, ln1_mean = kNone, ln1_rstd = kNone, qkv = kNone, q = kNone, kv = kNone, probs = kNone,
         atty = kNone, res_mid = kNone, ln2 = kNone, ln2_mean = kNone, ln2_rstd = kNone, fch = kNone,
         fch_gelu = kNone, res_out = kNone, d_out = kNone, d_mid = kNone;
  size_t xs = kNone, hpre = kNone, h = kNone, ys = kNone, xr = kNone, yr = kNone, rows = kNone, pos = kNone, weight = kNone, row_weight = kNone;
  size_t dlogits = kNone, xg = kNone;
  size_t qk_in = kNone, qk_rstd = kNone;  // QK-norm
  size_t mla = kNone, mla_rstd = kNone;    // multi-head latent attention
};

// Rows this rank's experts may receive: every assignment of the micro-batch without ep; under
// ep each rank's tokens, each choosing at most min(k, E/ep) of this rank's experts.
size_t moe_received_rows(const GptStage& stage) {
  const Shard& s = stage.shard();
  const size_t N = size_t(stage.N()), k = size_t(s.model.experts_per_token);
  return s.ep_size > 1 ? size_t(s.ep_size) * N * std::min(k, size_t(s.experts_local())) : N * k;
}

LayerRegions add_layer(BufferPlan& p, const GptStage& stage, Keep keep, bool moe, bool scratch = false) {
  const Shard& s = stage.shard();
  const DType dt = stage.compute_dtype();
  const size_t N = size_t(stage.N()), C = size_t(s.C()), A = size_t(s.attn_local()), F = size_t(s.ffn_local());
  const size_t Nl = size_t(stage.tokens_local());  // residual-stream rows (N/tp under sequence parallelism)
  const bool llama = s.llama();
  const size_t KV = size_t(s.kv_local()), F_in = llama ? 2 * F : F;
  const char* norm = llama ? "rmsnorm outputs" : "layernorm outputs";
  const char* stats = llama ? "rmsnorm statistics" : "layernorm statistics";
  LayerRegions r;
  // Norm outputs are kept for the local rows (under sequence parallelism the column-parallel
  // layers read them gathered, forward and backward, as Megatron does).
  if (keep.internals) {
    r.ln1 = p.add(norm, dt, Nl * C);
    if (!llama) r.ln1_mean = p.add_f32(stats, Nl);
    r.ln1_rstd = p.add_f32(stats, Nl);
  }
  if (llama && keep.forward_only) {
    r.q = p.add("q, kv before RoPE", dt, N * A);
    r.kv = p.add("q, kv before RoPE", dt, N * KV);
  }
  if (keep.internals) r.qkv = p.add("qkv", dt, N * 3 * A);
  if (keep.internals && llama && s.model.qk_norm) {  // QK-norm's inputs and statistics, per head
    r.qk_in = p.add("QK-norm inputs", dt, N * size_t((s.heads_local() + s.kv_heads_local()) * s.head_dim()));
    r.qk_rstd = p.add_f32("QK-norm statistics", N * size_t(s.heads_local() + s.kv_heads_local()));
  }
  if (keep.internals && llama && s.mla()) {  // MLA's latents, heads and attention output
    r.mla = p.add("MLA latents and heads", dt, N * size_t(mla_activation_width(s)));
    r.mla_rstd = p.add_f32("MLA norm statistics", 2 * N);
  }
  if (keep.probs)
    r.probs = p.add_f32("attention probabilities / lse", stage.attention_state_floats());
  if (keep.internals) {
    r.atty = p.add("attention outputs", dt, N * A);
    r.res_mid = p.add("residual stream", dt, Nl * C);
    r.ln2 = p.add(norm, dt, Nl * C);
    if (!llama) r.ln2_mean = p.add_f32(stats, Nl);
    r.ln2_rstd = p.add_f32(stats, Nl);
    if (moe) {
      // The shared experts' MLP (this rank's Fs columns) keeps what a dense MLP does. The layer
      // scratch (`scratch`) serves the stage's dense layers too.
      const size_t Fs = s.has_shared_experts() ? size_t(s.shared_ffn_local()) : 0;
      const size_t Fw = std::max(Fs, scratch && s.model.moe_layers() < s.model.layers ? F : size_t(0));
      if (Fw > 0) {
        r.fch = p.add(llama ? "MLP gate and up" : "MLP pre-GELU", dt, N * (llama ? 2 * Fw : Fw));
        r.fch_gelu = p.add(llama ? "MLP post-SwiGLU" : "MLP post-GELU", dt, N * Fw);
      }
      // Every assignment may be kept (no dropping): N k rows in expert order.
      const size_t M = N * size_t(s.model.experts_per_token), Fe = size_t(s.expert_ffn()), R = moe_received_rows(stage);
      r.xs = p.add("experts' inputs and outputs", dt, M * C);
      r.hpre = p.add(llama ? "experts' gate and up" : "experts' pre-GELU", dt, R * (llama ? 2 * Fe : Fe));
      r.h = p.add(llama ? "experts' post-SwiGLU" : "experts' post-GELU", dt, R * Fe);
      r.ys = p.add("experts' inputs and outputs", dt, M * C);
      if (s.ep_size > 1) {
        r.xr = p.add("experts' received rows", dt, R * C);
        r.yr = p.add("experts' received rows", dt, R * C);
      }
      if (s.etp_size > 1) r.xg = p.add("experts' rows gathered over etp", dt, size_t(s.etp_size) * R * C);
      r.rows = p.add_f32("routing", M);
      r.pos = p.add_f32("routing", M);
      r.weight = p.add_f32("routing", M);
      r.row_weight = p.add_f32("routing", M);
      if (keep.split_gradients)
        r.dlogits = p.add("output gradients for the weight pass", dt, N * size_t(s.model.experts));
    } else {
      r.fch = p.add(llama ? "MLP gate and up" : "MLP pre-GELU", dt, N * F_in);
      r.fch_gelu = p.add(llama ? "MLP post-SwiGLU" : "MLP post-GELU", dt, N * F);
    }
  }
  if (keep.res_out) r.res_out = p.add("residual stream", dt, Nl * C);
  if (keep.split_gradients) {
    r.d_out = p.add("output gradients for the weight pass", dt, Nl * C);
    r.d_mid = p.add("output gradients for the weight pass", dt, Nl * C);
  }
  return r;
}

// Views of a layer's regions in p; what p does not hold comes from `rest` (the recompute scratch).
LayerActs layer_views(const BufferPlan& p, const LayerRegions& r, const LayerActs& rest) {
  auto t = [&](size_t i, const Tensor& other) { return i == kNone ? other : p.tensor(i); };
  auto f = [&](size_t i, float* other) { return i == kNone ? other : p.f32(i); };
  auto ints = [&](size_t i, int32_t* other) { return i == kNone ? other : reinterpret_cast<int32_t*>(p.f32(i)); };
  LayerActs a{t(r.ln1, rest.ln1),        f(r.ln1_mean, rest.ln1_mean), f(r.ln1_rstd, rest.ln1_rstd),
          t(r.qkv, rest.qkv),        t(r.q, rest.q),               t(r.kv, rest.kv),
          f(r.probs, rest.probs),    t(r.atty, rest.atty),         t(r.res_mid, rest.res_mid),
          t(r.ln2, rest.ln2),        f(r.ln2_mean, rest.ln2_mean), f(r.ln2_rstd, rest.ln2_rstd),
          t(r.fch, rest.fch),        t(r.fch_gelu, rest.fch_gelu), t(r.res_out, rest.res_out),
          t(r.d_out, rest.d_out),    t(r.d_mid, rest.d_mid)};
  // Device int32 arrays live in fp32 regions (same size; the copies are bitwise).
  const MoeActs& o = rest.moe;
  a.moe = {t(r.xs, o.xs),          t(r.hpre, o.hpre),         t(r.h, o.h),
           t(r.ys, o.ys),          t(r.xr, o.xr),             t(r.yr, o.yr),
           ints(r.rows, o.rows),   ints(r.pos, o.pos),        f(r.weight, o.weight),
           f(r.row_weight, o.row_weight), o.route,       t(r.dlogits, o.dlogits), t(r.xg, o.xg)};
  a.qk_in = t(r.qk_in, rest.qk_in);
  a.qk_rstd = f(r.qk_rstd, rest.qk_rstd);
  a.mla = t(r.mla, rest.mla);
  a.mla_rstd = f(r.mla_rstd, rest.mla_rstd);
  if (a.moe.xr.empty()) a.moe.xr = a.moe.xs, a.moe.yr = a.moe.ys;  // without ep the rows stay here
  if (a.moe.xg.empty()) a.moe.xg = a.moe.xr;                        // without etp the experts run on them
  return a;
}

// What a micro-batch keeps of each layer under a recomputation recipe. Ring attention keeps
// the lse, not the probabilities, so selective recomputation has nothing to drop there.
Keep kept_by_micro_batch(Recompute r, bool ring) {
  if (r == Recompute::Full) return {false, false, true};  // only the layer's output = next layer's input
  if (r == Recompute::Selective) return {ring, true, true};
  return {};
}
}  // namespace

Activations::Activations(const GptStage& stage) : plan_(stage.kernels()) {
  const Shard& s = stage.shard();
  const DType dt = stage.compute_dtype();
  const size_t N = size_t(stage.N()), C = size_t(s.C()), V = size_t(s.vocab_local());
  const size_t Nl = size_t(stage.tokens_local());  // residual-stream rows (N/tp under sequence parallelism)
  BufferPlan& p = plan_;
  const bool llama = s.llama();
  const size_t res_in = p.add("residual stream", dt, Nl * C);
  const char* norm = llama ? "rmsnorm outputs" : "layernorm outputs";
  const char* stats = llama ? "rmsnorm statistics" : "layernorm statistics";
  Keep keep = kept_by_micro_batch(stage.recompute(), stage.context().active());
  keep.split_gradients = stage.split_backward();
  std::vector<LayerRegions> layers;
  const int64_t all = s.num_layers() + s.mtp_count();  // the MTP layers after the stage's own
  for (int64_t l = 0; l < all; ++l) layers.push_back(add_layer(p, stage, keep, s.moe_layer(s.first_layer + l)));
  struct MtpRegions {
    size_t emb, e, e_rstd, h, h_rstd, cat, x, fin, fin_rstd, logits, losses, row_max, sumexp, target;
  };
  std::vector<MtpRegions> mtp;
  for (int64_t k = 0; k < s.mtp_count(); ++k) {
    MtpRegions r;
    r.emb = p.add("MTP embedding and norms", dt, Nl * C);
    r.e = p.add("MTP embedding and norms", dt, Nl * C);
    r.e_rstd = p.add_f32("rmsnorm statistics", Nl);
    r.h = p.add("MTP embedding and norms", dt, Nl * C);
    r.h_rstd = p.add_f32("rmsnorm statistics", Nl);
    r.cat = p.add("MTP embedding and norms", dt, Nl * 2 * C);
    r.x = p.add("residual stream", dt, Nl * C);
    r.fin = p.add(norm, dt, Nl * C);
    r.fin_rstd = p.add_f32("rmsnorm statistics", Nl);
    r.logits = p.add("logits", dt, N * V);
    r.losses = p.add_f32("loss statistics", N);
    r.row_max = p.add_f32("loss statistics", N);
    r.sumexp = p.add_f32("loss statistics", N);
    r.target = p.add_f32("loss statistics", N);
    mtp.push_back(r);
  }
  size_t lnf = 0, lnf_mean = kNone, lnf_rstd = 0, logits = 0, losses = 0, row_max = 0, sumexp = 0, target = 0;
  if (s.has_output) {
    lnf = p.add(norm, dt, Nl * C);
    if (!llama) lnf_mean = p.add_f32(stats, Nl);
    lnf_rstd = p.add_f32(stats, Nl);
    logits = p.add("logits", dt, N * V);
    losses = p.add_f32("loss statistics", N);
    row_max = p.add_f32("loss statistics", N);
    sumexp = p.add_f32("loss statistics", N);
    target = p.add_f32("loss statistics", N);
  }
  p.allocate();
  res_in_ = p.tensor(res_in);
  routes_.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    layers_.push_back(layer_views(p, layers[l], stage.rc_acts_));
    // A MoE layer's routing (host, small): its own, kept for the routing statistics even under
    // full recomputation, whose backward routes again into the layer scratch's (rc_route_).
    if (s.moe_layer(s.first_layer + int64_t(l)))
      layers_.back().moe.route = &routes_[l];
    else
      layers_.back().moe = MoeActs{};
  }
  for (const MtpRegions& r : mtp)
    mtp_.push_back(MtpActs{p.tensor(r.emb), p.tensor(r.e), p.tensor(r.h), p.f32(r.e_rstd), p.f32(r.h_rstd),
                           p.tensor(r.cat), p.tensor(r.x), p.tensor(r.fin), p.f32(r.fin_rstd), p.tensor(r.logits),
                           p.f32(r.losses), p.f32(r.row_max), p.f32(r.sumexp), p.f32(r.target),
                           std::vector<int32_t>(N), std::vector<int32_t>(N)});
  out_ = s.num_layers() == 0 ? res_in_ : layers_[size_t(s.num_layers() - 1)].res_out;
  if (s.has_output) {
    lnf_ = p.tensor(lnf);
    lnf_mean_ = lnf_mean == kNone ? nullptr : p.f32(lnf_mean);
    lnf_rstd_ = p.f32(lnf_rstd);
    logits_ = p.tensor(logits);
    losses_ = p.f32(losses);
    row_max_ = p.f32(row_max);
    sumexp_ = p.f32(sumexp);
    target_logit_ = p.f32(target);
  }
}

// ---------------------------------------------------------------- stage
namespace {
// The stage's preconditions (the trainer checks the run first; these guard the other callers).
void check_stage(const Kernels& k, const Shard& s, const StageConfig& c) {
  if (c.B <= 0 || c.T <= 0)
    throw std::invalid_argument("GptStage: B (" + std::to_string(c.B) + ") and T (" + std::to_string(c.T) +
                                ") must be positive");
  if (c.storage && c.storage->holds_weights() && c.compute != DType::F32)
    throw std::invalid_argument("GptStage: weights held unit by unit (ZeRO-3) are fp32 only");
  if (!k.supports(c.compute) || (c.compute != DType::F32 && c.compute != DType::BF16))
    throw InputError({{std::string("the model cannot compute in ") + comm::dtype_name(c.compute) + " on " +
                           k.device_name(),
                       "train in fp32 on the CPU; bf16 mixed precision needs a CUDA GPU (--device cuda)",
                       "precision-unsupported"}});
  if (s.tp_size > 1 && (!c.tp || c.tp->size() != s.tp_size))
    throw std::invalid_argument("GptStage: tp_size " + std::to_string(s.tp_size) +
                                " needs a tensor-parallel communicator of that size");
  if (c.T > s.model.seq_len) throw std::invalid_argument("GptStage: T exceeds the model's seq_len");
  const bool cp = c.cp && c.cp->size() > 1;
  if (cp) {
    if (!k.supports_ring_attention())
      throw InputError({{"context parallel needs ring-attention kernels, which " + k.device_name() + " lacks",
                         "train with --cp on the CPU (--device cpu)", "cp-device"}});
    if (c.T % (2 * c.cp->size()) != 0)
      throw std::invalid_argument("GptStage: context parallel cuts a sequence into 2 cp chunks: T (" +
                                  std::to_string(c.T) + ") must be a multiple of 2 x cp (" +
                                  std::to_string(2 * c.cp->size()) + ")");
  }
  if (c.split_backward && c.recompute == Recompute::Full)
    throw std::invalid_argument("GptStage: a split backward's weight pass reads the layer activations full "
                                "recomputation drops");
  if (s.llama()) {
    if (!k.supports_gqa())
      throw InputError({{"Llama models need grouped-query attention kernels, which " + k.device_name() + " lacks",
                         "train Llama-family models on --device cpu or cuda", "llama-device"}});
    if (s.head_dim() % 2 != 0)
      throw std::invalid_argument("GptStage: rotary embeddings need an even head size, got " +
                                  std::to_string(s.head_dim()));
    const int64_t kv = s.kv_heads();
    if (s.model.heads % kv != 0 || (kv % s.tp_size != 0 && s.tp_size % kv != 0))
      throw std::invalid_argument("GptStage: kv_heads " + std::to_string(kv) + " must divide heads (" +
                                  std::to_string(s.model.heads) + ") and divide or be a multiple of tp (" +
                                  std::to_string(s.tp_size) + ")");
  }
  if (s.mtp_count() > 0 && !s.llama())
    throw std::invalid_argument("GptStage: multi-token prediction is written for the Llama family's layer");
  if (s.mtp_count() > 0 && c.split_backward)
    throw std::invalid_argument("GptStage: a split backward (zb-h1) with multi-token prediction is not implemented");
  if (s.mtp_count() > 0 && c.storage && c.storage->holds_weights())
    throw std::invalid_argument("GptStage: multi-token prediction with weights held unit by unit (ZeRO-3) is not implemented");
  if (s.mla()) {
    const ModelSpec& m = s.model;
    if (!s.llama() || m.qk_norm || c.split_backward || m.qk_rope_head_dim % 2 != 0 || m.qk_nope_head_dim <= 0 ||
        m.v_head_dim <= 0 || m.v_head_dim > m.qk_nope_head_dim + m.qk_rope_head_dim)
      throw std::invalid_argument(
          "GptStage: multi-head latent attention runs in the Llama family's layer without QK-norm or a split backward, "
          "with an even qk_rope_head_dim and v_head_dim at most qk_nope_head_dim + qk_rope_head_dim");
  }
  if (!s.llama() && s.model.qk_norm)
    throw std::invalid_argument("GptStage: QK-norm is written for the Llama family's layer");
  if (!s.llama() && (s.model.sliding_window > 0 || s.model.attention_sinks))
    throw std::invalid_argument("GptStage: sliding windows and attention sinks are written for the Llama family's layer");
  if (s.has_moe() && s.model.experts % s.ep_size != 0)
    throw std::invalid_argument("GptStage: ep_size " + std::to_string(s.ep_size) + " must divide the " +
                                std::to_string(s.model.experts) + " experts");
  if (s.has_moe() && (s.etp_size < 1 || s.expert_ffn() % s.etp_size != 0))
    throw std::invalid_argument("GptStage: etp_size " + std::to_string(s.etp_size) + " must divide the experts' " +
                                std::to_string(s.expert_ffn()) + " columns");
  if (s.has_moe() && s.etp_size > 1 && c.split_backward)
    throw std::invalid_argument("GptStage: a split backward (zb-h1) with experts split over etp is not implemented");
  if (s.has_shared_experts() && (s.model.shared_experts * s.expert_ffn()) % s.tp_size != 0)
    throw std::invalid_argument("GptStage: tp_size " + std::to_string(s.tp_size) + " must divide the shared experts' " +
                                std::to_string(s.model.shared_experts * s.expert_ffn()) + " columns");
  const int64_t T_local = cp ? c.T / c.cp->size() : c.T;
  if (c.sequence_parallel && s.tp_size > 1 && T_local % s.tp_size != 0)
    throw std::invalid_argument("GptStage: sequence parallel needs T (" + std::to_string(T_local) +
                                ") divisible by tp_size (" + std::to_string(s.tp_size) + ")");
}
}  // namespace

GptStage::GptStage(Kernels& k, const Shard& shard, const StageConfig& c)
    : k_(k),
      layout_(shard),
      B_(c.B),
      T_(c.cp && c.cp->size() > 1 ? c.T / c.cp->size() : c.T),
      tp_(c.tp),
      sp_(c.sequence_parallel && shard.tp_size > 1),
      dt_(c.compute),
      storage_(c.storage),
      ext_w_(c.storage && c.storage->holds_weights()),
      ext_g_(c.storage && c.storage->holds_grads()),
      plan_(k),
      rc_(c.recompute),
      split_(c.split_backward),
      rc_plan_(k) {
  mtp_scaling_ = c.mtp_loss_scaling;
  check_stage(k, layout_.shard(), c);
  if (c.cp && c.cp->size() > 1) {
    moe_cp_ = c.cp;
    ctx_ = ContextSplit{c.cp->size(), c.cp->rank(), c.T};
    const Shard& s = layout_.shard();
    ring_ = std::make_unique<RingAttention>(k, *c.cp, ctx_, B_, s.heads_local(),
                                            s.llama() ? s.kv_heads_local() : s.heads_local(), s.head_dim(), c.compute);
  }
  allocate_stage_buffers();
  allocate_layer_scratch();
}

// Weights (fp32 master, and the bf16 copy), gradients and the backward scratch, one allocation.
void GptStage::allocate_stage_buffers() {
  const Shard& s = layout_.shard();
  const DType compute = dt_;
  const int64_t B = B_;
  const bool fp32 = compute == DType::F32;
  const size_t P = size_t(layout_.total());
  const size_t N = size_t(B * T_), C = size_t(s.C()), A = size_t(s.attn_local()), F = size_t(s.ffn_local());
  const size_t Nl = size_t(tokens_local());
  BufferPlan& p = plan_;
  const size_t r_params = ext_w_ ? 0 : p.add_f32("master weights (f32)", P);
  const size_t r_grads = ext_g_ ? 0 : p.add_f32("gradients (f32)", P);
  const size_t r_w = fp32 ? 0 : p.add("weights (bf16 copy)", compute, P);
  const size_t r_dres = p.add("residual gradient", compute, Nl * C);
  const size_t r_dtmp = p.add("gradient scratch", compute, N * C);
  const bool llama = s.llama();
  const size_t Fs = s.has_shared_experts() ? size_t(s.shared_ffn_local()) : 0, Fm = std::max(F, Fs);
  const size_t r_dbig = p.add("gradient scratch", compute, N * std::max(3 * A, llama ? 2 * Fm : Fm));
  const size_t r_datty = p.add("gradient scratch", compute, N * A);
  const size_t r_dattn = p.add_f32("attention backward scratch",
                                   ring_ ? 1 : std::max<size_t>(1, k_.attention_scratch_size(B, T_, s.heads_local())));
  size_t r_full = 0, r_pack = 0, r_lnout = 0, r_lngrad = 0;
  if (sp_) {
    r_full = p.add("sequence-parallel scratch", compute, N * C);
    r_pack = p.add("sequence-parallel scratch", compute, N * C);
    r_lnout = p.add("sequence-parallel scratch", compute, Nl * C);
    r_lngrad = p.add_f32("sequence-parallel norm gradients", 4 * C);
  }
  size_t r_dmlp = 0, r_dkv = 0, r_dtmp2 = 0, r_kvgrad = 0, r_qkgrad = 0, r_mla = 0, r_mlagrad = 0;
  const bool kv_replicated = llama && s.kv_replicas() > 1;
  if (llama) {
    r_dmlp = p.add("gradient scratch", compute, N * Fm);
    r_dkv = p.add("gradient scratch", compute, N * size_t(s.kv_local()));
    r_dtmp2 = p.add("gradient scratch", compute, N * C);
    if (kv_replicated)  // kv_w's, then kv_b's where the model has it (sum_replicated_kv_grads)
      r_kvgrad = p.add_f32("replicated kv gradients",
                           size_t(s.kv_heads() * s.kv_local() * (s.C() + (s.model.has_qkv_bias() ? 1 : 0))));
    if (s.model.qk_norm && s.tp_size > 1) r_qkgrad = p.add_f32("QK-norm weight gradients", size_t(2 * s.head_dim()));
    if (s.mla()) r_mla = p.add("MLA gradient scratch", compute, N * size_t(mla_scratch_width(s)));
    if (s.mla() && s.tp_size > 1) r_mlagrad = p.add_f32("MLA replicated weight gradients", size_t(mla_replicated_grads(s)));
  }
  size_t r_dcat = 0, r_half = 0, r_carry = 0, r_mtpw = 0;
  if (s.mtp_count() > 0) {
    r_dcat = p.add("MTP gradient scratch", compute, Nl * 2 * C);
    r_half = p.add("MTP gradient scratch", compute, Nl * C);
    r_carry = p.add("MTP gradient scratch", compute, Nl * C);
    if (sp_) r_mtpw = p.add_f32("MTP gradient scratch", 2 * C * C);
  }
  size_t r_moe_logits = 0, r_moe_f32 = 0, r_dys = 0, r_dh = 0, r_dhpre = 0, r_dxs = 0, r_mdx = 0, r_dots = 0;
  size_t r_dyr = 0, r_dxr = 0, r_counts = 0, r_shared = 0, r_yg = 0, r_dyg = 0;
  if (s.has_moe()) {
    const size_t E = size_t(s.model.experts), M = N * size_t(s.model.experts_per_token), Fe = size_t(s.expert_ffn());
    const size_t R = moe_received_rows(*this);
    r_moe_logits = p.add("router scratch", compute, N * E);
    r_moe_f32 = p.add_f32("router scratch", N * E);
    r_dys = p.add("experts' gradient scratch", compute, M * C);
    r_dh = p.add("experts' gradient scratch", compute, R * Fe);
    r_dhpre = p.add("experts' gradient scratch", compute, R * (llama ? 2 * Fe : Fe));
    r_dxs = p.add("experts' gradient scratch", compute, M * C);
    r_mdx = p.add("router scratch", compute, N * C);
    r_dots = p.add_f32("router scratch", M);
    if (s.ep_size > 1) {
      r_dyr = p.add("experts' gradient scratch", compute, R * C);
      r_dxr = p.add("experts' gradient scratch", compute, R * C);
    }
    r_counts = p.add_f32("router scratch", size_t((3 + s.etp_size) * s.ep_size * s.experts_local()));
    if (s.etp_size > 1) {
      r_yg = p.add("experts' rows gathered over etp", compute, size_t(s.etp_size) * R * C);
      r_dyg = p.add("experts' rows gathered over etp", compute, size_t(s.etp_size) * R * C);
    }
    if (Fs > 0) r_shared = p.add("shared experts' scratch", compute, N * C);
  }
  p.allocate();
  if (s.has_moe()) {
    moe_logits_ = p.tensor(r_moe_logits);
    moe_f32_ = p.f32(r_moe_f32);
    moe_dys_ = p.tensor(r_dys);
    moe_dh_ = p.tensor(r_dh);
    moe_dhpre_ = p.tensor(r_dhpre);
    moe_dxs_ = p.tensor(r_dxs);
    moe_dx_ = p.tensor(r_mdx);
    moe_dots_ = p.f32(r_dots);
    moe_dyr_ = s.ep_size > 1 ? p.tensor(r_dyr) : moe_dys_;
    moe_dxr_ = s.ep_size > 1 ? p.tensor(r_dxr) : moe_dxs_;
    moe_counts_ = p.f32(r_counts);
    if (s.etp_size > 1) moe_yg_ = p.tensor(r_yg), moe_dyg_ = p.tensor(r_dyg);
    if (Fs > 0) shared_out_ = p.tensor(r_shared);
  }
  if (llama) {
    dmlp_ = p.tensor(r_dmlp);
    dkv_ = p.tensor(r_dkv);
    dtmp2_ = p.tensor(r_dtmp2);
    if (kv_replicated) kvgrad_ = p.f32(r_kvgrad);
    if (r_qkgrad) qkgrad_ = p.f32(r_qkgrad);
    if (r_mla) mla_ = p.tensor(r_mla);
    if (r_mlagrad) mlagrad_ = p.f32(r_mlagrad);
  }
  if (s.mtp_count() > 0) {
    mtp_dcat_ = p.tensor(r_dcat);
    mtp_half_ = p.tensor(r_half);
    mtp_carry_ = p.tensor(r_carry);
    if (sp_) mtp_wgrad_ = p.f32(r_mtpw);
  }
  params_ = ext_w_ ? nullptr : p.f32(r_params);
  grads_ = ext_g_ ? nullptr : p.f32(r_grads);
  w_ = ext_w_ ? Tensor() : fp32 ? Tensor(params_, P) : p.tensor(r_w);
  dres_ = p.tensor(r_dres);
  dtmp_ = p.tensor(r_dtmp);
  dbig_ = p.tensor(r_dbig);
  datty_ = p.tensor(r_datty);
  dattn_ = p.f32(r_dattn);
  if (sp_) {
    full_ = p.tensor(r_full);
    pack_ = p.tensor(r_pack);
    lnout_ = p.tensor(r_lnout);
    lngrad_ = p.f32(r_lngrad);
  }
}

void GptStage::allocate_layer_scratch() {
  const Shard& s = layout_.shard();
  // Layer scratch shared by the micro-batches: what they do not keep (full recomputation: a
  // whole layer, its output included, so recomputing never writes a kept tensor; selective: the
  // probabilities) and Llama's forward-only q and kv.
  if (rc_ != Recompute::None || s.llama() || s.has_moe()) {
    const Keep keep = kept_by_micro_batch(rc_, ring_ != nullptr);
    const LayerRegions r =
        add_layer(rc_plan_, *this, {!keep.probs, !keep.internals, rc_ == Recompute::Full, true}, s.has_moe(), true);
    rc_plan_.allocate();
    rc_acts_ = layer_views(rc_plan_, r, LayerActs{});
    rc_acts_.moe.route = &rc_route_;
  }
}

void GptStage::init_params(uint64_t seed) {
  if (ext_w_) throw std::logic_error("GptStage::init_params: the weights are held by the trainer's units (ZeRO-3)");
  std::vector<float> host(size_t(layout_.total()), 0.0f);
  init_gpt2(layout_, seed, host.data());
  k_.from_host(params_, host.data(), host.size());
  params_updated();
}

}  // namespace trident::nn
