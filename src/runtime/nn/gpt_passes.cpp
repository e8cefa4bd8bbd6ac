// GPT-2 stage: forward and backward, layer by layer, and the tensor-parallel collectives and
// norms they use (see gpt.h for the contract); the activations and the stage's set-up are gpt.cpp.
#include "runtime/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/problems.h"
#include "runtime/nn/init.h"

namespace trident::nn {

using kernels::DType;
using kernels::Kernels;

// Context parallel: local row (b, i) of chunk k holds position first_position(k) + i - k c.
void GptStage::add_positions(const Tensor& x) {
  const int64_t C = shard().C();
  if (!ctx_.active()) return k_.add_positions(x, W(layout_.wpe, shard().model.seq_len * C), B_, T_, C);
  const int64_t c = ctx_.chunk();
  for (int64_t b = 0; b < B_; ++b)
    for (int k = 0; k < 2; ++k)
      k_.add_positions(x.slice(size_t((b * T_ + k * c) * C), size_t(c * C)),
                       W(layout_.wpe + ctx_.first_position(k) * C, c * C), 1, c, C);
}

void GptStage::positions_backward(const Tensor& dx) {
  const int64_t C = shard().C();
  if (!ctx_.active()) return k_.positions_backward(grad_at(layout_.wpe), dx, B_, T_, C);
  const int64_t c = ctx_.chunk();
  for (int64_t b = 0; b < B_; ++b)
    for (int k = 0; k < 2; ++k)
      k_.positions_backward(grad_at(layout_.wpe) + ctx_.first_position(k) * C,
                            dx.slice(size_t((b * T_ + k * c) * C), size_t(c * C)), 1, c, C);
}

void GptStage::zero_grads() {
  if (!ext_g_) k_.zero(grads_, size_t(layout_.total()));  // a unit's gradients are zeroed when handed out
}

void GptStage::params_updated() {
  if (dt_ != DType::F32 && !ext_w_) k_.convert(w_, Tensor(params_, size_t(layout_.total())));
}

void GptStage::params_updated(int64_t begin, int64_t end) {
  if (dt_ != DType::F32 && !ext_w_ && end > begin)
    k_.convert(w_.slice(size_t(begin), size_t(end - begin)), Tensor(params_ + begin, size_t(end - begin)));
}

void GptStage::all_reduce_tp(const Tensor& x, comm::ReduceOp op) {
  if (tp_ && tp_->size() > 1) tp_->all_reduce(x.data, x.count, x.dtype, op);
}

// ---------------------------------------------------------------- sequence parallel
// Local row b*Ts + t of rank r is token (b, r*Ts + t); the collectives want rank r's rows as
// one contiguous block, so with B > 1 the full tensor is reordered rank-major through pack_.
void GptStage::sp_reduce_scatter(const Tensor& out, const Tensor& full) {
  const size_t tp = size_t(shard().tp_size), Ts = size_t(T_) / tp, C = size_t(shard().C()), B = size_t(B_),
               T = size_t(T_);
  Tensor send = full;
  if (B_ > 1) {
    for (size_t r = 0; r < tp; ++r)
      for (size_t b = 0; b < B; ++b)
        k_.convert(pack_.slice((r * B + b) * Ts * C, Ts * C), full.slice((b * T + r * Ts) * C, Ts * C));
    send = pack_;
  }
  tp_->reduce_scatter(send.data, out.data, B * Ts * C, full.dtype, comm::ReduceOp::Sum);
}

void GptStage::sp_all_gather(const Tensor& full, const Tensor& shard_rows) {
  const size_t tp = size_t(shard().tp_size), Ts = size_t(T_) / tp, C = size_t(shard().C()), B = size_t(B_),
               T = size_t(T_);
  if (B_ == 1) {
    tp_->all_gather(shard_rows.data, full.data, Ts * C, full.dtype);
    return;
  }
  tp_->all_gather(shard_rows.data, pack_.data, B * Ts * C, full.dtype);
  for (size_t r = 0; r < tp; ++r)
    for (size_t b = 0; b < B; ++b)
      k_.convert(full.slice((b * T + r * Ts) * C, Ts * C), pack_.slice((r * B + b) * Ts * C, Ts * C));
}

void GptStage::reduce_rows(const Tensor& out, const Tensor& partial) {
  if (sp_) sp_reduce_scatter(out, partial);
  else all_reduce_tp(out.slice(0, size_t(N() * shard().C())));  // partial == out
}

Tensor GptStage::norm_full(const Tensor& out, float* mean, float* rstd, const Tensor& inp, int64_t w, int64_t b) {
  const int64_t C = shard().C();
  const float eps = float(shard().model.norm_epsilon());
  if (shard().llama()) k_.rmsnorm_forward(out, rstd, inp, W(w, C), tokens_local(), C, eps);
  else k_.layernorm_forward(out, mean, rstd, inp, W(w, C), W(b, C), tokens_local(), C, eps);
  return gathered(out);
}

Tensor GptStage::gathered(const Tensor& rows) {
  if (!sp_) return rows;
  sp_all_gather(full_, rows);
  return full_;
}

Tensor GptStage::full_grad(const Tensor& dres) {
  if (!sp_) return dres;
  sp_all_gather(full_, dres);
  return full_;
}

Tensor GptStage::local_grad(const Tensor& partial) {
  if (!sp_) {
    all_reduce_tp(partial.slice(0, size_t(N() * shard().C())));
    return partial;
  }
  sp_reduce_scatter(lnout_, partial);
  return lnout_;
}

void GptStage::sum_norm_grads(std::initializer_list<int64_t> offsets) {
  if (!sp_) return;
  const int64_t C = shard().C();
  tp_->all_reduce(lngrad_, size_t(offsets.size() * C), comm::DType::F32, comm::ReduceOp::Sum);
  int slot = 0;
  for (int64_t off : offsets) k_.add_inplace(Tensor(grad_at(off), size_t(C)), Tensor(lngrad_ + (slot++) * C, size_t(C)));
  k_.zero(lngrad_, size_t(4 * C));
}

void GptStage::norm_backward(const Tensor& dres, int64_t w, int64_t b, int slot, const Tensor& dout,
                             const Tensor& inp, const float* mean, const float* rstd) {
  const int64_t C = shard().C();
  if (b < 0) k_.rmsnorm_backward(dres, norm_grad(w, slot), dout, inp, W(w, C), rstd, tokens_local(), C);
  else k_.layernorm_backward(dres, norm_grad(w, slot), norm_grad(b, slot + 1), dout, inp, W(w, C), mean, rstd,
                             tokens_local(), C);
}

void GptStage::forward(Activations& a, const int32_t* tokens, const int32_t* targets) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local(), L = layout_.num_layers();
  // Ranges of the flat layout in the order forward reads them: before the first layer, each
  // layer, after the last.
  auto need = [&](int64_t begin, int64_t end) {
    if (weights_hook_ && end > begin) weights_hook_(begin, end);
  };
  need(0, L > 0 ? layout_.layer(0).begin : layout_.total());
  // A stage without the input holds no wte (its offset is -1): no view of it is made.
  if (s.has_input && sp_) {
    // Partial lookups of the vocabulary slices, positions once (tp rank 0), reduce-scatter.
    k_.embedding_forward(full_, tokens, W(layout_.wte, V * C), N, C, s.vocab_offset(), V);
    if (tp_lead() && layout_.wpe >= 0) add_positions(full_);
    sp_reduce_scatter(a.res_in_, full_);
  } else if (s.has_input) {
    embed(a.res_in_, tokens, layout_.wte);
    if (layout_.wpe >= 0) add_positions(a.res_in_);
  }  // else: the previous stage's output was received into res_in_
  Tensor res = a.res_in_;
  a.moe_aux_ = 0;
  for (int64_t i = 0; i < L; ++i) {
    need(layout_.layer(i).begin, layout_.layer(i).end);
    layer_forward(a, i, res);
    if (const MoeRouting* r = a.routing(i)) a.moe_aux_ += r->aux_loss + r->z_loss;
    res = a.layers_[i].res_out;
  }
  if (L > 0) need(layout_.layer(L - 1).end, layout_.total());
  if (s.has_output) {
    const Tensor lnf = norm_full(a.lnf_, a.lnf_mean_, a.lnf_rstd_, res, layout_.lnf_w, layout_.lnf_b);
    k_.linear_forward(a.logits_, lnf, W(layout_.head(), V * C), Tensor(), N, C, V);
    k_.xent_row_max(a.row_max_, a.logits_, N, V, s.vocab_valid());
    all_reduce_tp(a.row_max_, size_t(N), comm::ReduceOp::Max);
    k_.xent_sumexp_target(a.sumexp_, a.target_logit_, a.logits_, a.row_max_, targets, N, V, s.vocab_valid(),
                          s.vocab_offset());
    all_reduce_tp(a.sumexp_, size_t(N));
    all_reduce_tp(a.target_logit_, size_t(N));
    k_.xent_losses(a.losses_, a.sumexp_, a.row_max_, a.target_logit_, N);
    if (s.mtp_count() > 0) {
      mtp_tokens(a, tokens, targets);
      mtp_forward(a, res);
    }
  }
}

double GptStage::loss_sum(Activations& a) {
  std::vector<float> host(static_cast<size_t>(N()));
  k_.to_host(host.data(), a.losses_, host.size());
  double sum = 0.0;
  for (float x : host) sum += x;
  return sum;
}

void GptStage::backward(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss) {
  weights_now_ = true;
  backward_pass(a, tokens, targets, dloss);
}

void GptStage::backward_input(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss) {
  if (!split_) throw std::logic_error("GptStage::backward_input on a stage built without split_backward");
  weights_now_ = false;
  backward_pass(a, tokens, targets, dloss);
  weights_now_ = true;
}

void GptStage::backward_weight(Activations& a) {
  if (!split_) throw std::logic_error("GptStage::backward_weight on a stage built without split_backward");
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local();
  if (s.has_output) {
    // a.logits_ holds the logits' gradient since backward_input.
    k_.linear_backward(Tensor(), grad_at(layout_.head()), nullptr, a.logits_, gathered(a.lnf_), W(layout_.head(), V * C),
                       N, C, V);
    if (grad_hook_) grad_hook_(layout_.lnf_w, layout_.total());
  }
  for (int64_t i = layout_.num_layers() - 1; i >= 0; --i) {
    if (s.llama()) llama_layer_weights(a.layers_[i], i);
    else gpt_layer_weights(a.layers_[i], i);
    if (grad_hook_) grad_hook_(layout_.layer(i).begin, layout_.total());
  }
  if (s.has_input && grad_hook_) grad_hook_(0, layout_.total());
}

void GptStage::backward_pass(Activations& a, const int32_t* tokens, const int32_t* targets, float dloss) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local(), Nl = tokens_local();
  const int64_t L = layout_.num_layers();
  const Tensor dres = dres_.slice(0, size_t(Nl * C));
  moe_aux_weight_ = dloss * float(N * (moe_cp_ ? moe_cp_->size() : 1));  // the micro-batch's tokens, all cp ranks
  if (s.has_output) {
    const Tensor res = L > 0 ? a.layers_[L - 1].res_out : a.res_in_;
    if (s.mtp_count() > 0) mtp_backward(a, res, dloss);  // its share of res's gradient in mtp_carry_
    k_.xent_backward_inplace(a.logits_, a.row_max_, a.sumexp_, targets, dloss, N, V, s.vocab_valid(), s.vocab_offset());
    k_.linear_backward(dtmp_, wgrad(layout_.head()), nullptr, a.logits_, winput_rows(a.lnf_), W(layout_.head(), V * C),
                       N, C, V);
    const Tensor dln = local_grad(dtmp_);
    k_.zero(static_cast<float*>(dres.data), (dres.bytes() + 3) / sizeof(float));  // regions are padded to 256 bytes
    norm_backward(dres, layout_.lnf_w, layout_.lnf_b, 0, dln, res, a.lnf_mean_, a.lnf_rstd_);
    if (s.mtp_count() > 0) k_.add_inplace(dres, mtp_carry_);
    if (layout_.lnf_b >= 0) sum_norm_grads({layout_.lnf_w, layout_.lnf_b});
    else sum_norm_grads({layout_.lnf_w});
    if (grad_hook_ && weights_now_) grad_hook_(layout_.lnf_w, layout_.total());
  }  // else: the next stage's gradient was received into dres
  for (int64_t i = L - 1; i >= 0; --i) {
    const Tensor& res_in = i == 0 ? a.res_in_ : a.layers_[i - 1].res_out;
    run_layer_backward(a, i, res_in, dres);
    if (grad_hook_ && weights_now_) grad_hook_(layout_.layer(i).begin, layout_.total());
  }
  if (s.has_input) {
    const Tensor demb = full_grad(dres);
    k_.embedding_backward(grad_at(layout_.wte), demb, tokens, N, C, s.vocab_offset(), V);
    if (layout_.wpe >= 0) positions_backward(demb);  // the GPT family (MTP is Llama-only)
    if (grad_hook_ && weights_now_) grad_hook_(0, layout_.total());
  }  // else: dres is the input gradient to send
}

void GptStage::run_layer_backward(Activations& a, int64_t i, const Tensor& res_in, const Tensor& dres) {
  if (rc_ != Recompute::Full) return layer_backward(a, i, res_in, dres);
  // The layer again from its kept input, into the scratch (its TP collectives included).
  if (shard().llama()) llama_layer_forward(rc_acts_, i, res_in);
  else gpt_layer_forward(rc_acts_, i, res_in);
  if (shard().llama()) llama_layer_backward(rc_acts_, i, res_in, dres);
  else gpt_layer_backward(rc_acts_, i, res_in, dres);
}

void GptStage::embed(const Tensor& rows, const int32_t* tokens, int64_t wte) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local();
  if (sp_) {
    k_.embedding_forward(full_, tokens, W(wte, V * C), N, C, s.vocab_offset(), V);
    sp_reduce_scatter(rows, full_);
  } else {
    k_.embedding_forward(rows, tokens, W(wte, V * C), N, C, s.vocab_offset(), V);
    all_reduce_tp(rows);
  }
}

void GptStage::embed_backward(const Tensor& drows, const int32_t* tokens, int64_t wte) {
  const Shard& s = shard();
  k_.embedding_backward(grad_at(wte), full_grad(drows), tokens, N(), s.C(), s.vocab_offset(), s.vocab_local());
}

void GptStage::layer_forward(Activations& a, int64_t i, const Tensor& res_in) {
  if (shard().llama()) llama_layer_forward(a.layers_[i], i, res_in);
  else gpt_layer_forward(a.layers_[i], i, res_in);
}

void GptStage::layer_backward(Activations& a, int64_t i, const Tensor& res_in, const Tensor& dres) {
  const LayerActs& x = a.layers_[i];
  // Selective recomputation: the attention probabilities again, from the kept q, k, v (the
  // output is rewritten with the same values).
  if (rc_ == Recompute::Selective && !ring_) attention_forward(x, i);
  if (shard().llama()) llama_layer_backward(x, i, res_in, dres);
  else gpt_layer_backward(x, i, res_in, dres);
}

void GptStage::gpt_layer_forward(const LayerActs& x, int64_t i, const Tensor& res_in) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerParams& p = layout_.layer(i);
  // Under sequence parallelism the row-parallel partial sums go to full_ and are reduce-scattered.
  const Tensor mid = sp_ ? full_ : x.res_mid;
  const Tensor out = sp_ ? full_ : x.res_out;
  const Tensor ln1 = norm_full(x.ln1, x.ln1_mean, x.ln1_rstd, res_in, p.ln1_w, p.ln1_b);
  k_.linear_forward(x.qkv, ln1, W(p.qkv_w, 3 * A * C), W(p.qkv_b, 3 * A), N, C, 3 * A);
  attention_forward(x, i);
  // Row-parallel projection: partial sums, bias once (tp rank 0), all-reduce, then residual.
  k_.linear_forward(mid, x.atty, W(p.attn_proj_w, C * A), tp_lead() ? W(p.attn_proj_b, C) : Tensor(), N, A, C);
  reduce_rows(x.res_mid, mid);
  k_.add_inplace(x.res_mid, res_in);
  const Tensor ln2 = norm_full(x.ln2, x.ln2_mean, x.ln2_rstd, x.res_mid, p.ln2_w, p.ln2_b);
  if (p.moe) {
    moe_mlp_forward(x, p, ln2, out);
  } else {
    k_.linear_forward(x.fch, ln2, W(p.fc_w, F * C), W(p.fc_b, F), N, C, F);
    k_.gelu_forward(x.fch_gelu, x.fch);
    k_.linear_forward(out, x.fch_gelu, W(p.fc_proj_w, C * F), tp_lead() ? W(p.fc_proj_b, C) : Tensor(), N, F, C);
  }
  reduce_rows(x.res_out, out);
  k_.add_inplace(x.res_out, x.res_mid);
}

void GptStage::gpt_layer_backward(const LayerActs& x, int64_t i, const Tensor& res_in, const Tensor& dres) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerParams& p = layout_.layer(i);
  const Tensor dbig_f = dbig_.slice(0, size_t(N * F)), dbig_qkv = dbig_.slice(0, size_t(N * 3 * A));
  // MLP: fc_proj (row-parallel: no collective backward), GELU, fc (column-parallel: all-reduce dinp).
  // Sequence parallel: dres holds the local rows; the linears read it gathered (full_grad), the
  // column-parallel input gradients are reduce-scattered (local_grad) instead of all-reduced.
  // A split backward leaves the weight gradients out (wgrad, winput give nothing) and keeps the
  // output gradients they need instead (gpt_layer_weights).
  const int64_t Nl = tokens_local();
  keep(x.d_out, dres);
  if (p.moe) {
    moe_mlp_backward(x, p, x.ln2, full_grad(dres), dtmp_);
  } else {
    k_.linear_backward(dbig_f, wgrad(p.fc_proj_w), wgrad(p.fc_proj_b), full_grad(dres), winput(x.fch_gelu),
                       W(p.fc_proj_w, C * F), N, F, C);
    k_.gelu_backward(dbig_f, x.fch, dbig_f);
    keep(x.fch, dbig_f);  // the pre-GELU activation is read: its region holds fc's output gradient
    k_.linear_backward(dtmp_, wgrad(p.fc_w), wgrad(p.fc_b), dbig_f, winput_rows(x.ln2), W(p.fc_w, F * C), N, C, F);
  }
  k_.layernorm_backward(dres, norm_grad(p.ln2_w, 0), norm_grad(p.ln2_b, 1), local_grad(dtmp_), x.res_mid,
                        W(p.ln2_w, C), x.ln2_mean, x.ln2_rstd, Nl, C);
  // Attention: projection (row-parallel), attention, QKV (column-parallel: all-reduce dinp).
  keep(x.d_mid, dres);
  k_.linear_backward(datty_, wgrad(p.attn_proj_w), wgrad(p.attn_proj_b), full_grad(dres), winput(x.atty),
                     W(p.attn_proj_w, C * A), N, A, C);
  attention_backward(dbig_qkv, x, i);
  keep(x.qkv, dbig_qkv);  // q, k, v are read: their region holds the QKV projection's output gradient
  k_.linear_backward(dtmp_, wgrad(p.qkv_w), wgrad(p.qkv_b), dbig_qkv, winput_rows(x.ln1), W(p.qkv_w, 3 * A * C), N, C,
                     3 * A);
  k_.layernorm_backward(dres, norm_grad(p.ln1_w, 2), norm_grad(p.ln1_b, 3), local_grad(dtmp_), res_in,
                        W(p.ln1_w, C), x.ln1_mean, x.ln1_rstd, Nl, C);
  sum_norm_grads({p.ln2_w, p.ln2_b, p.ln1_w, p.ln1_b});  // slots 0..3 in this order
}

void GptStage::gpt_layer_weights(const LayerActs& x, int64_t i) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerParams& p = layout_.layer(i);
  auto G = [&](int64_t offset) { return grad_at(offset); };
  const Tensor none;
  if (p.moe) {
    moe_mlp_weights(x, p);
  } else {
    k_.linear_backward(none, G(p.fc_proj_w), G(p.fc_proj_b), gathered(x.d_out), x.fch_gelu, W(p.fc_proj_w, C * F), N,
                       F, C);
    k_.linear_backward(none, G(p.fc_w), G(p.fc_b), x.fch.slice(0, size_t(N * F)), gathered(x.ln2), W(p.fc_w, F * C),
                       N, C, F);
  }
  k_.linear_backward(none, G(p.attn_proj_w), G(p.attn_proj_b), gathered(x.d_mid), x.atty, W(p.attn_proj_w, C * A), N,
                     A, C);
  k_.linear_backward(none, G(p.qkv_w), G(p.qkv_b), x.qkv, gathered(x.ln1), W(p.qkv_w, 3 * A * C), N, C, 3 * A);
}

}  // namespace trident::nn
