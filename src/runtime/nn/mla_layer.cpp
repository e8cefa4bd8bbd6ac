// Multi-head latent attention (DeepSeek-V2/V3; HF modeling_deepseek's DeepseekV3Attention) in the
// Llama layer: queries q_b(RMSNorm(q_a(h))) (or q_w h without q_lora_rank), heads of
// nope + rope; kv_a(h) = [latent c | one rope key k_pe shared by the heads]; kv_b(RMSNorm(c)) =
// per head [k_nope | v]; RoPE on the queries' rope part and on k_pe; keys [k_nope | k_pe];
// softmax scale (nope + rope)^-0.5, the attention kernels' 1/sqrt(head_dim) with head_dim =
// nope + rope, times YaRN's get_mscale(factor, mscale_all_dim)^2 where the model has it (DeepSeek-V3:
// 1.874 at factor 40), applied to the queries as they enter the attention's qkv. The kernels take one head width for q, k and v, so the values are zero-padded to
// it and the output's padding dropped (1 + rope/v more PV work than needed).
// Rope layout: HF's DeepSeek code de-interleaves q_pe and k_pe (view d/2, 2 -> transpose) before
// rotate_half, i.e. it rotates the interleaved pairs (2i, 2i+1) -- Trident's convention -- and
// only permutes the result, which the q.k product does not see. So Trident's rope on the weights
// as Hugging Face stores them gives the same scores: import and export copy them unpermuted.
// Tensor parallel as Megatron-Core's MLA: heads split (q_b, kv_b column-parallel, the output
// projection row-parallel); q_a, kv_a and their norms replicated, their gradients (each rank's
// heads' share) summed over tp. Under cp the ring passes each head's keys and values as for
// any attention.
#include "core/rope_scaling.h"
#include "runtime/nn/gpt.h"

namespace trident::nn {

namespace {
Tensor from(const Tensor& t, int64_t offset) { return t.slice(size_t(offset), t.count - size_t(offset)); }

struct Dims {
  int64_t N, C, A, nh, D, qr, kvr, dn, dr, dv, KA, KB, O;
};
Dims dims(const Shard& s, int64_t N) {
  const ModelSpec& m = s.model;
  return {N,
          s.C(),
          s.attn_local(),
          s.heads_local(),
          s.head_dim(),
          m.q_lora_rank,
          m.kv_lora_rank,
          m.qk_nope_head_dim,
          m.qk_rope_head_dim,
          m.v_head_dim,
          m.kv_lora_rank + m.qk_rope_head_dim,
          s.mla_kv_b_local(),
          s.out_local()};
}

// LayerActs::mla: q_a's output before its norm and after (q_b's input), kv_a's output (its
// latent normalised in place, its rope key rotated), the latent before its norm, the normalised
// latent (kv_b's input), kv_b's output, the attention output without padding (o_proj's input).
struct Views {
  Tensor qa_in, qa, kva, c_in, cn, kvb, o;
};
Views views(const Tensor& all, const Dims& d) {
  Views v;
  size_t at = 0;
  auto take = [&](int64_t width) {
    const Tensor t = all.slice(at, size_t(d.N * width));
    at += size_t(d.N * width);
    return t;
  };
  v.qa_in = take(d.qr), v.qa = take(d.qr), v.kva = take(d.KA), v.c_in = take(d.kvr), v.cn = take(d.kvr);
  v.kvb = take(d.KB), v.o = take(d.O);
  return v;
}

// The stage's MLA scratch: the queries' rope parts (forward and backward), then the backward's
// gradients of kv_a's and kv_b's outputs, of the normalised latent, of q_a's normalised output
// and of the unpadded attention output.
struct Scratch {
  Tensor pe, dkva, dkvb, dcn, dqa, dout;
};
Scratch scratch(const Tensor& all, const Dims& d) {
  Scratch g;
  size_t at = 0;
  auto take = [&](int64_t width) {
    const Tensor t = all.slice(at, size_t(d.N * width));
    at += size_t(d.N * width);
    return t;
  };
  g.pe = take(d.nh * d.dr), g.dkva = take(d.KA), g.dkvb = take(d.KB), g.dcn = take(d.kvr), g.dqa = take(d.qr);
  g.dout = take(d.O);
  return g;
}
}  // namespace

int64_t mla_activation_width(const Shard& s) {
  const Dims d = dims(s, 1);
  return 2 * d.qr + d.KA + 2 * d.kvr + d.KB + d.O;
}

int64_t mla_scratch_width(const Shard& s) {
  const Dims d = dims(s, 1);
  return d.nh * d.dr + d.KA + d.KB + d.kvr + d.qr + d.O;
}

int64_t mla_replicated_grads(const Shard& s) {
  const Dims d = dims(s, 1);
  return d.qr * d.C + d.qr + d.KA * d.C + d.kvr;
}

void GptStage::mla_attention_forward(const LayerActs& x, int64_t i, const Tensor& ln1, const Tensor& out) {
  const Shard& s = shard();
  const LayerParams& p = layout_.layer(i);
  const Dims d = dims(s, N());
  const int64_t N = d.N, C = d.C, A = d.A, nh = d.nh, D = d.D, dn = d.dn, dr = d.dr, dv = d.dv;
  const float eps = float(s.model.norm_epsilon());
  const Views v = views(x.mla, d);
  if (d.qr > 0) {
    k_.linear_forward(v.qa, ln1, W(p.q_a_w, d.qr * C), Tensor(), N, C, d.qr);
    k_.head_rmsnorm_forward(v.qa, v.qa_in, x.mla_rstd, W(p.q_a_norm_w, d.qr), N, 1, d.qr, d.qr, eps);
    k_.linear_forward(x.q, v.qa, W(p.q_b_w, A * d.qr), Tensor(), N, d.qr, A);
  } else {
    k_.linear_forward(x.q, ln1, W(p.q_w, A * C), Tensor(), N, C, A);
  }
  k_.linear_forward(v.kva, ln1, W(p.kv_a_w, d.KA * C), Tensor(), N, C, d.KA);
  k_.head_rmsnorm_forward(v.kva, v.c_in, x.mla_rstd + N, W(p.kv_a_norm_w, d.kvr), N, 1, d.kvr, d.KA, eps);
  k_.copy_heads(v.cn, d.kvr, 0, v.kva, d.KA, 0, N, 1, d.kvr);
  k_.linear_forward(v.kvb, v.cn, W(p.kv_b_w, d.KB * d.kvr), Tensor(), N, d.kvr, d.KB);
  // RoPE on each query head's rope part (through the scratch: the rope kernels rotate heads at
  // the start of a row) and on the one rope key.
  const Tensor pe = scratch(mla_, d).pe, qpe = from(x.q, dn), kpe = from(v.kva, d.kvr);
  k_.copy_heads(pe, nh * dr, dr, qpe, A, D, N, nh, dr);
  rope_rows(pe, nh, dr, nh * dr, false);
  k_.copy_heads(qpe, A, D, pe, nh * dr, dr, N, nh, dr);
  rope_rows(kpe, 1, dr, d.KA, false);
  // The attention's qkv: the queries; keys [k_nope | k_pe broadcast]; values zero-padded to D.
  const int64_t row = 3 * A;
  const Tensor kq = from(x.qkv, A), vq = from(x.qkv, 2 * A);
  k_.copy_heads(x.qkv, row, 0, x.q, A, 0, N, 1, A, false, float(yarn::softmax_multiplier(s.model.rope_scaling)));
  k_.copy_heads(kq, row, D, v.kvb, d.KB, dn + dv, N, nh, dn);
  k_.copy_heads(from(kq, dn), row, D, kpe, d.KA, 0, N, nh, dr);
  k_.copy_heads(vq, row, D, from(v.kvb, dn), d.KB, dn + dv, N, nh, dv);
  if (dv < D) k_.copy_heads(from(vq, dv), row, D, Tensor(), 0, 0, N, nh, D - dv);
  attention_forward(x, i);
  k_.copy_heads(v.o, d.O, dv, x.atty, A, D, N, nh, dv);
  k_.linear_forward(out, v.o, W(p.attn_proj_w, C * d.O), Tensor(), N, d.O, C);
}

void GptStage::mla_attention_backward(const LayerActs& x, int64_t i, const Tensor& dout) {
  const Shard& s = shard();
  const LayerParams& p = layout_.layer(i);
  const Dims d = dims(s, N());
  const int64_t N = d.N, C = d.C, A = d.A, nh = d.nh, D = d.D, dn = d.dn, dr = d.dr, dv = d.dv, qr = d.qr;
  const Views v = views(x.mla, d);
  const Scratch g = scratch(mla_, d);
  // Output projection (row-parallel), then the attention with the padded values' gradient zero.
  k_.linear_backward(g.dout, wgrad(p.attn_proj_w), nullptr, dout, v.o, W(p.attn_proj_w, C * d.O), N, d.O, C);
  k_.copy_heads(datty_, A, D, g.dout, d.O, dv, N, nh, dv);
  if (dv < D) k_.copy_heads(from(datty_, dv), A, D, Tensor(), 0, 0, N, nh, D - dv);
  const Tensor dqkv = dbig_.slice(0, size_t(N * 3 * A));
  attention_backward(dqkv, x, i);
  const int64_t row = 3 * A;
  const Tensor dq = datty_, dk = from(dqkv, A), dvals = from(dqkv, 2 * A), dqpe = from(dq, dn);
  k_.copy_heads(dq, A, 0, dqkv, row, 0, N, 1, A, false, float(yarn::softmax_multiplier(s.model.rope_scaling)));
  k_.copy_heads(g.pe, nh * dr, dr, dqpe, A, D, N, nh, dr);
  rope_rows(g.pe, nh, dr, nh * dr, true);  // rotating back is the rotation's backward
  k_.copy_heads(dqpe, A, D, g.pe, nh * dr, dr, N, nh, dr);
  // The shared rope key: every head's gradient summed, rotated back.
  const Tensor dkpe = from(g.dkva, d.kvr);
  k_.copy_heads(dkpe, d.KA, 0, from(dk, dn), row, D, N, nh, dr);
  rope_rows(dkpe, 1, dr, d.KA, true);
  k_.copy_heads(g.dkvb, d.KB, dn + dv, dk, row, D, N, nh, dn);
  k_.copy_heads(from(g.dkvb, dn), d.KB, dn + dv, dvals, row, D, N, nh, dv);
  k_.linear_backward(g.dcn, wgrad(p.kv_b_w), nullptr, g.dkvb, v.cn, W(p.kv_b_w, d.KB * d.kvr), N, d.kvr, d.KB);
  k_.copy_heads(g.dkva, d.KA, 0, g.dcn, d.kvr, 0, N, 1, d.kvr);
  // The replicated down projections and norms: this rank's heads' share of their gradients,
  // summed over tp below (straight into the gradients without tp).
  int64_t at = 0;
  auto replicated = [&](int64_t offset, int64_t n) {
    if (!mlagrad_) return grad_at(offset);
    float* r = mlagrad_ + at;
    at += n;
    return r;
  };
  float* g_qa = qr > 0 ? replicated(p.q_a_w, qr * C) : nullptr;
  float* g_qan = qr > 0 ? replicated(p.q_a_norm_w, qr) : nullptr;
  float* g_kva = replicated(p.kv_a_w, d.KA * C);
  float* g_kvan = replicated(p.kv_a_norm_w, d.kvr);
  k_.head_rmsnorm_backward(g.dkva, g_kvan, v.c_in, W(p.kv_a_norm_w, d.kvr), x.mla_rstd + N, N, 1, d.kvr, d.KA);
  const Tensor ln1 = gathered(x.ln1);  // after dout is consumed: both may live in full_ (sequence parallel)
  k_.linear_backward(dtmp_, g_kva, nullptr, g.dkva, ln1, W(p.kv_a_w, d.KA * C), N, C, d.KA);
  if (qr > 0) {
    k_.linear_backward(g.dqa, wgrad(p.q_b_w), nullptr, dq, v.qa, W(p.q_b_w, A * qr), N, qr, A);
    k_.head_rmsnorm_backward(g.dqa, g_qan, v.qa_in, W(p.q_a_norm_w, qr), x.mla_rstd, N, 1, qr, qr);
    k_.linear_backward(dtmp2_, g_qa, nullptr, g.dqa, ln1, W(p.q_a_w, qr * C), N, C, qr);
  } else {
    k_.linear_backward(dtmp2_, wgrad(p.q_w), nullptr, dq, ln1, W(p.q_w, A * C), N, C, A);
  }
  k_.add_inplace(dtmp_, dtmp2_);
  if (!mlagrad_) return;
  tp_->all_reduce(mlagrad_, size_t(at), comm::DType::F32, comm::ReduceOp::Sum);
  at = 0;
  auto add = [&](int64_t offset, int64_t n) {
    k_.add_inplace(Tensor(grad_at(offset), size_t(n)), Tensor(mlagrad_ + at, size_t(n)));
    at += n;
  };
  if (qr > 0) add(p.q_a_w, qr * C), add(p.q_a_norm_w, qr);
  add(p.kv_a_w, d.KA * C);
  add(p.kv_a_norm_w, d.kvr);
  k_.zero(mlagrad_, size_t(at));
}

}  // namespace trident::nn
