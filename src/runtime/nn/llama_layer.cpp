// One Llama layer of a GptStage, forward and backward (see gpt.h): RMSNorm, query and kv
// projections, QK-norm where the model has it (Qwen3: an RMSNorm over each head's queries and
// keys, before RoPE), kv heads repeated per query head, RoPE on the queries and keys, causal attention
// (GPT-OSS: a sliding window on its window layers, sinks; gpt.cpp's attention_mask), row-parallel
// projection; RMSNorm, gate|up projection, SwiGLU (GPT-OSS: its clamped unit), row-parallel down
// projection. Biases where the model has them (GPT-OSS, Qwen2): q and kv's split with their heads,
// the row-parallel projections' added once (tp rank 0's partial sum, as the GPT layer does).
// The tensor- and sequence-parallel collectives are the GPT layer's (gpt.cpp).
#include "core/rope_scaling.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/rope.h"

namespace trident::nn {

kernels::RopeFreq rope_freq(const ModelSpec& m, int64_t hd) {
  kernels::RopeFreq f;
  f.theta = float(m.rope_theta);
  const RopeScaling& r = m.rope_scaling;
  f.factor = float(r.factor);
  if (r.type == "llama3") {
    f.llama3 = true;
    f.low_freq_factor = float(r.low_freq_factor);
    f.high_freq_factor = float(r.high_freq_factor);
    f.original_max_position = float(r.original_max_position);
  } else if (r.type == "yarn") {
    const yarn::Ramp ramp = yarn::ramp(r, m.rope_theta, int(hd));
    f.yarn = true;
    f.ramp_low = ramp.low, f.ramp_high = ramp.high;
    f.attention = float(yarn::attention_factor(r));
  }
  return f;
}

void GptStage::rotary(const Tensor& qkv, bool inverse) {
  const Shard& s = shard();
  const int64_t A = s.attn_local();
  for (int64_t part = 0; part < 2; ++part)  // queries, then keys
    rope_rows(qkv.slice(size_t(part * A), qkv.count - size_t(part * A)), s.heads_local(), s.head_dim(), 3 * A, inverse);
}

void GptStage::rope_rows(const Tensor& x, int64_t heads, int64_t hd, int64_t row, bool inverse) {
  const kernels::RopeFreq freq = rope_freq(shard().model, hd);
  if (!ctx_.active()) {
    k_.rope(x, B_, T_, heads, hd, row, freq, inverse);
    return;
  }
  const int64_t c = ctx_.chunk();  // context parallel: each chunk at its whole-sequence positions
  for (int64_t b = 0; b < B_; ++b)
    for (int k = 0; k < 2; ++k) {
      const size_t at = size_t((b * T_ + k * c) * row);
      k_.rope_at(x.slice(at, x.count - at), c, heads, hd, row, freq, inverse, ctx_.first_position(k));
    }
}

void GptStage::llama_layer_forward(const LayerActs& x, int64_t i, const Tensor& res_in) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local(), KV = s.kv_local();
  const LayerParams& p = layout_.layer(i);
  const Tensor mid = sp_ ? full_ : x.res_mid;
  const Tensor out = sp_ ? full_ : x.res_out;
  const Tensor ln1 = norm_full(x.ln1, nullptr, x.ln1_rstd, res_in, p.ln1_w, -1);
  if (s.mla()) {
    mla_attention_forward(x, i, ln1, mid);
  } else {
    k_.linear_forward(x.q, ln1, W(p.q_w, A * C), bias(p.q_b, A), N, C, A);
    k_.linear_forward(x.kv, ln1, W(p.kv_w, KV * C), bias(p.kv_b, KV), N, C, KV);
    if (p.q_norm_w >= 0) qk_norm_forward(x, p);
    k_.gqa_expand(x.qkv, x.q, x.kv, N, s.heads_local(), s.kv_heads_local(), s.head_dim());
    rotary(x.qkv, false);
    attention_forward(x, i);
    k_.linear_forward(mid, x.atty, W(p.attn_proj_w, C * A), tp_lead() ? bias(p.attn_proj_b, C) : Tensor(), N, A, C);
  }
  reduce_rows(x.res_mid, mid);
  k_.add_inplace(x.res_mid, res_in);
  const Tensor ln2 = norm_full(x.ln2, nullptr, x.ln2_rstd, x.res_mid, p.ln2_w, -1);
  if (p.moe) {
    moe_mlp_forward(x, p, ln2, out);
  } else {
    k_.linear_forward(x.fch, ln2, W(p.fc_w, 2 * F * C), bias(p.fc_b, 2 * F), N, C, 2 * F);
    glu_forward(x.fch_gelu, x.fch, N, F);
    k_.linear_forward(out, x.fch_gelu, W(p.fc_proj_w, C * F), tp_lead() ? bias(p.fc_proj_b, C) : Tensor(), N, F, C);
  }
  reduce_rows(x.res_out, out);
  k_.add_inplace(x.res_out, x.res_mid);
}

void GptStage::llama_layer_backward(const LayerActs& x, int64_t i, const Tensor& res_in, const Tensor& dres) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local(), KV = s.kv_local();
  const LayerParams& p = layout_.layer(i);
  const Tensor dgate_up = dbig_.slice(0, size_t(N * 2 * F)), dqkv = dbig_.slice(0, size_t(N * 3 * A));
  // MLP: down projection (row-parallel), SwiGLU, gate|up (column-parallel), RMSNorm. A split
  // backward keeps the output gradients the weight pass needs instead (llama_layer_weights).
  keep(x.d_out, dres);
  if (p.moe) {
    moe_mlp_backward(x, p, x.ln2, full_grad(dres), dtmp_);
  } else {
    k_.linear_backward(dmlp_, wgrad(p.fc_proj_w), bgrad(p.fc_proj_b), full_grad(dres), winput(x.fch_gelu),
                       W(p.fc_proj_w, C * F), N, F, C);
    glu_backward(dgate_up, x.fch, dmlp_, N, F);
    keep(x.fch, dgate_up);  // gate and up are read: their region holds gate_up's output gradient
    k_.linear_backward(dtmp_, wgrad(p.fc_w), bgrad(p.fc_b), dgate_up, winput_rows(x.ln2), W(p.fc_w, 2 * F * C), N, C,
                       2 * F);
  }
  norm_backward(dres, p.ln2_w, -1, 0, local_grad(dtmp_), x.res_mid, nullptr, x.ln2_rstd);
  // Attention: projection (row-parallel), attention, RoPE / GQA, q and kv (column-parallel).
  keep(x.d_mid, dres);
  if (s.mla()) {  // a split backward is refused with MLA (check_stage): weights_now_ holds
    mla_attention_backward(x, i, full_grad(dres));
    norm_backward(dres, p.ln1_w, -1, 1, local_grad(dtmp_), res_in, nullptr, x.ln1_rstd);
    sum_norm_grads({p.ln2_w, p.ln1_w});
    return;
  }
  k_.linear_backward(datty_, wgrad(p.attn_proj_w), bgrad(p.attn_proj_b), full_grad(dres), winput(x.atty),
                     W(p.attn_proj_w, C * A), N, A, C);
  attention_backward(dqkv, x, i);
  rotary(dqkv, true);  // rotating back is the rotation's backward
  const int64_t nh = s.heads_local(), hd = s.head_dim();
  const Tensor dq = datty_;  // the attention output gradient is consumed: reuse it for dq
  k_.gqa_reduce(dq, dkv_, dqkv, N, nh, s.kv_heads_local(), hd);
  if (p.q_norm_w >= 0) qk_norm_backward(x, p, dq, dkv_);
  keep(x.qkv, dq);  // the rotated q, k, v are read: their region holds dq then dkv
  keep(x.qkv.slice(size_t(N * A), size_t(N * KV)), dkv_);
  // Replicated kv heads: this rank's share of the kv_w gradient goes to its kv head's slot.
  float* dkv_w = !weights_now_ ? nullptr : kvgrad_ ? kvgrad_ + s.kv_head_first() * KV * C : grad_at(p.kv_w);
  const Tensor ln1 = winput_rows(x.ln1);
  k_.linear_backward(dtmp_, dkv_w, weights_now_ ? kv_bias_grad(p) : nullptr, dkv_, ln1, W(p.kv_w, KV * C), N, C, KV);
  k_.linear_backward(dtmp2_, wgrad(p.q_w), bgrad(p.q_b), dq, ln1, W(p.q_w, A * C), N, C, A);
  k_.add_inplace(dtmp_, dtmp2_);
  norm_backward(dres, p.ln1_w, -1, 1, local_grad(dtmp_), res_in, nullptr, x.ln1_rstd);
  sum_norm_grads({p.ln2_w, p.ln1_w});  // slots 0, 1 in this order
  if (kvgrad_ && weights_now_) sum_replicated_kv_grads(p);
}

void GptStage::llama_layer_weights(const LayerActs& x, int64_t i) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local(), KV = s.kv_local();
  const LayerParams& p = layout_.layer(i);
  auto G = [&](int64_t offset) { return grad_at(offset); };
  const Tensor none;
  if (p.moe) {
    moe_mlp_weights(x, p);
  } else {
    k_.linear_backward(none, G(p.fc_proj_w), bgrad(p.fc_proj_b), gathered(x.d_out), x.fch_gelu, W(p.fc_proj_w, C * F),
                       N, F, C);
    k_.linear_backward(none, G(p.fc_w), bgrad(p.fc_b), x.fch, gathered(x.ln2), W(p.fc_w, 2 * F * C), N, C, 2 * F);
  }
  k_.linear_backward(none, G(p.attn_proj_w), bgrad(p.attn_proj_b), gathered(x.d_mid), x.atty, W(p.attn_proj_w, C * A),
                     N, A, C);
  const Tensor ln1 = gathered(x.ln1);
  float* dkv_w = kvgrad_ ? kvgrad_ + s.kv_head_first() * KV * C : G(p.kv_w);
  k_.linear_backward(none, dkv_w, kv_bias_grad(p), x.qkv.slice(size_t(N * A), size_t(N * KV)), ln1, W(p.kv_w, KV * C),
                     N, C, KV);
  k_.linear_backward(none, G(p.q_w), bgrad(p.q_b), x.qkv.slice(0, size_t(N * A)), ln1, W(p.q_w, A * C), N, C, A);
  if (kvgrad_) sum_replicated_kv_grads(p);
}

void GptStage::qk_norm_forward(const LayerActs& x, const LayerParams& p) {
  const Shard& s = shard();
  const int64_t N = this->N(), hd = s.head_dim(), nh = s.heads_local(), nkv = s.kv_heads_local();
  const float eps = float(s.model.norm_epsilon());
  const size_t nq = size_t(N * nh * hd);
  k_.head_rmsnorm_forward(x.q, x.qk_in.slice(0, nq), x.qk_rstd, W(p.q_norm_w, hd), N, nh, hd, s.attn_local(), eps);
  // The keys: the first nkv heads of each kv row (the values follow them, unnormalised).
  k_.head_rmsnorm_forward(x.kv, x.qk_in.slice(nq, size_t(N * nkv * hd)), x.qk_rstd + N * nh, W(p.k_norm_w, hd), N,
                          nkv, hd, s.kv_local(), eps);
}

void GptStage::qk_norm_backward(const LayerActs& x, const LayerParams& p, const Tensor& dq, const Tensor& dkv) {
  const Shard& s = shard();
  const int64_t N = this->N(), hd = s.head_dim(), nh = s.heads_local(), nkv = s.kv_heads_local();
  const size_t nq = size_t(N * nh * hd);
  // Each tp rank holds some heads: its weight gradients are partial sums, added over the TP
  // group (replicated kv heads too: each replica's dk is its query heads' share).
  float* gq = qkgrad_ ? qkgrad_ : grad_at(p.q_norm_w);
  float* gk = qkgrad_ ? qkgrad_ + hd : grad_at(p.k_norm_w);
  k_.head_rmsnorm_backward(dq, gq, x.qk_in.slice(0, nq), W(p.q_norm_w, hd), x.qk_rstd, N, nh, hd, s.attn_local());
  k_.head_rmsnorm_backward(dkv, gk, x.qk_in.slice(nq, size_t(N * nkv * hd)), W(p.k_norm_w, hd), x.qk_rstd + N * nh,
                           N, nkv, hd, s.kv_local());
  if (!qkgrad_) return;
  tp_->all_reduce(qkgrad_, size_t(2 * hd), comm::DType::F32, comm::ReduceOp::Sum);
  k_.add_inplace(Tensor(grad_at(p.q_norm_w), size_t(hd)), Tensor(qkgrad_, size_t(hd)));
  k_.add_inplace(Tensor(grad_at(p.k_norm_w), size_t(hd)), Tensor(qkgrad_ + hd, size_t(hd)));
  k_.zero(qkgrad_, size_t(2 * hd));
}

// Replicated kv heads: kvgrad_ holds every kv head's kv_w gradient, then (with kv biases) every
// kv head's kv_b gradient; summed over the TP group, this rank's kv head's added to its own.
void GptStage::sum_replicated_kv_grads(const LayerParams& p) {
  const Shard& s = shard();
  const size_t n = size_t(s.kv_local() * s.C()), nb = size_t(s.kv_local()), heads = size_t(s.kv_heads());
  const size_t all = heads * (n + (p.kv_b >= 0 ? nb : 0));
  tp_->all_reduce(kvgrad_, all, comm::DType::F32, comm::ReduceOp::Sum);
  k_.add_inplace(Tensor(grad_at(p.kv_w), n), Tensor(kvgrad_ + size_t(s.kv_head_first()) * n, n));
  if (p.kv_b >= 0)
    k_.add_inplace(Tensor(grad_at(p.kv_b), nb), Tensor(kvgrad_ + heads * n + size_t(s.kv_head_first()) * nb, nb));
  k_.zero(kvgrad_, all);
}

// Where the kv bias gradient goes: its slot in kvgrad_ when kv heads are replicated over tp.
float* GptStage::kv_bias_grad(const LayerParams& p) const {
  if (p.kv_b < 0) return nullptr;
  const Shard& s = shard();
  if (!kvgrad_) return grad_at(p.kv_b);
  return kvgrad_ + s.kv_heads() * s.kv_local() * s.C() + s.kv_head_first() * s.kv_local();
}

void GptStage::glu_forward(const Tensor& out, const Tensor& gate_up, int64_t n, int64_t F) {
  const float limit = float(shard().model.activation_clamp);
  if (limit > 0) k_.swiglu_oss_forward(out, gate_up, n, F, limit);
  else k_.swiglu_forward(out, gate_up, n, F);
}

void GptStage::glu_backward(const Tensor& dgate_up, const Tensor& gate_up, const Tensor& dout, int64_t n, int64_t F) {
  const float limit = float(shard().model.activation_clamp);
  if (limit > 0) k_.swiglu_oss_backward(dgate_up, gate_up, dout, n, F, limit);
  else k_.swiglu_backward(dgate_up, gate_up, dout, n, F);
}

}  // namespace trident::nn
