// Multi-token prediction (DeepSeek-V3 section 2.2, Megatron-Core's multi_token_prediction.py) on
// the stage holding the output. Depth k = 1..D at local row i (whole-sequence position p):
//   h_k = Layer_k( eh_proj( [ enorm(Emb(t_{p+k})) ; hnorm(h_{k-1}) ] ) ),  h_0 = the main hidden
//   state before the final norm; logits_k = head(mtp_norm_k(h_k)) predicting t_{p+k+1} (the
//   label of position p+k).
// The concatenation puts the embedding first (Megatron-Core, Hugging Face's DeepSeek-V3). Past
// the sequence's end the input token is 0 (Megatron's roll fills 0) and the row has no target.
// The embedding is the model's (wte, or its copy head_wte on a last stage without the input,
// whose gradient the trainer sums with the first stage's); the head is the main head.
// Tensor parallel: the norms and eh_proj are replicated (each rank projects its residual rows;
// under sequence parallelism the rows differ and eh_proj's gradient is summed over tp), the
// layer is the model's own (split as any layer), the embedding vocabulary-parallel.
#include <algorithm>
#include <stdexcept>

#include "runtime/nn/gpt.h"

namespace trident::nn {

// Depth k at position p reads token t_{p+k} and predicts label p+k (= t_{p+k+1}): the inputs and
// the labels rolled by k, as Megatron-Core rolls input_ids and labels (the rolled-in inputs 0,
// their labels masked). Under cp the rank's rows are two chunks of each sequence: the whole
// sequences' tokens and labels are gathered from the cp group first (a small all-gather of ids).
void GptStage::mtp_tokens(Activations& a, const int32_t* tokens, const int32_t* targets) {
  const int64_t Tl = T_, B = B_, T = ctx_.active() ? ctx_.T : T_;
  std::vector<int32_t> tok(size_t(B * T)), tgt(size_t(B * T));
  if (!ctx_.active()) {
    std::copy(tokens, tokens + B * T, tok.begin());
    std::copy(targets, targets + B * T, tgt.begin());
  } else {
    std::vector<int32_t> mine(tokens, tokens + B * Tl), all(size_t(2 * ctx_.cp * B * Tl));
    mine.insert(mine.end(), targets, targets + B * Tl);
    moe_cp_->all_gather(mine.data(), all.data(), mine.size(), comm::DType::F32);  // 4-byte ids, bitwise
    for (int64_t r = 0; r < ctx_.cp; ++r)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < Tl; ++j) {
          const size_t at = size_t(b * T + ctx_.position(j, r)), from = size_t((2 * r * B + b) * Tl + j);
          tok[at] = all[from];
          tgt[at] = all[from + size_t(B * Tl)];
        }
  }
  for (size_t d = 0; d < a.mtp_.size(); ++d) {
    const int64_t k = int64_t(d) + 1;
    MtpActs& m = a.mtp_[d];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < Tl; ++j) {
        const int64_t p = ctx_.position(j), row = b * Tl + j;
        m.in_tok[size_t(row)] = p + k < T ? tok[size_t(b * T + p + k)] : 0;
        m.tgt[size_t(row)] = p + k < T ? tgt[size_t(b * T + p + k)] : -1;
      }
  }
}

namespace {
// Rows [first, first + n) of a [rows, width] tensor.
Tensor rows_of(const Tensor& t, int64_t first, int64_t n, int64_t width) {
  return t.slice(size_t(first * width), size_t(n * width));
}
}  // namespace

void GptStage::mtp_forward(Activations& a, const Tensor& h0) {
  const Shard& s = shard();
  const int64_t N = this->N(), Nl = tokens_local(), C = s.C(), V = s.vocab_local(), L = layout_.num_layers();
  const float eps = float(s.model.norm_epsilon());
  Tensor prev = h0;
  for (size_t d = 0; d < a.mtp_.size(); ++d) {
    const int64_t i = L + int64_t(d);
    const LayerParams& p = layout_.layer(i);
    MtpActs& m = a.mtp_[d];
    embed(m.emb, m.in_tok.data(), layout_.embedding());
    k_.rmsnorm_forward(m.e, m.e_rstd, m.emb, W(p.enorm_w, C), Nl, C, eps);
    k_.rmsnorm_forward(m.h, m.h_rstd, prev, W(p.hnorm_w, C), Nl, C, eps);
    for (int64_t r = 0; r < Nl; ++r) {
      k_.convert(rows_of(m.cat, 2 * r, 1, C), rows_of(m.e, r, 1, C));
      k_.convert(rows_of(m.cat, 2 * r + 1, 1, C), rows_of(m.h, r, 1, C));
    }
    k_.linear_forward(m.x, m.cat, W(p.eh_proj_w, 2 * C * C), Tensor(), Nl, 2 * C, C);
    layer_forward(a, i, m.x);
    if (const MoeRouting* route = a.routing(i)) a.moe_aux_ += route->aux_loss + route->z_loss;
    prev = a.layers_[size_t(i)].res_out;
    const Tensor fin = norm_full(m.fin, nullptr, m.fin_rstd, prev, p.mtp_norm_w, -1);
    k_.linear_forward(m.logits, fin, W(layout_.head(), V * C), Tensor(), N, C, V);
    k_.xent_row_max(m.row_max, m.logits, N, V, s.vocab_valid());
    all_reduce_tp(m.row_max, size_t(N), comm::ReduceOp::Max);
    k_.xent_sumexp_target(m.sumexp, m.target_logit, m.logits, m.row_max, m.tgt.data(), N, V, s.vocab_valid(),
                          s.vocab_offset());
    all_reduce_tp(m.sumexp, size_t(N));
    all_reduce_tp(m.target_logit, size_t(N));
    k_.xent_losses(m.losses, m.sumexp, m.row_max, m.target_logit, N);
  }
}

double GptStage::mtp_loss_sum(Activations& a, int64_t k) {
  const MtpActs& m = a.mtp_.at(size_t(k - 1));
  std::vector<float> host(static_cast<size_t>(N()));
  k_.to_host(host.data(), m.losses, host.size());
  double sum = 0.0;
  for (size_t r = 0; r < host.size(); ++r)
    if (m.tgt[r] >= 0) sum += host[r];
  return sum;
}

// Depths D..1; each depth's output gradient is its head's plus the next depth's hnorm share
// (mtp_carry_); depth 1's hnorm share of the main hidden state is left in mtp_carry_.
void GptStage::mtp_backward(Activations& a, const Tensor& h0, float dloss) {
  const Shard& s = shard();
  const int64_t N = this->N(), Nl = tokens_local(), C = s.C(), V = s.vocab_local(), L = layout_.num_layers();
  const int64_t D = int64_t(a.mtp_.size()), T = ctx_.active() ? ctx_.T : T_;
  const Tensor dres = dres_.slice(0, size_t(Nl * C));
  const size_t esz = comm::dtype_size(dt_);
  auto clear = [&](const Tensor& t) { k_.zero(static_cast<float*>(t.data), (t.bytes() + 3) / sizeof(float)); };
  for (int64_t d = D - 1; d >= 0; --d) {
    const int64_t i = L + d, k = d + 1;
    const LayerParams& p = layout_.layer(i);
    MtpActs& m = a.mtp_[size_t(d)];
    const Tensor out = a.layers_[size_t(i)].res_out;
    const Tensor prev = d == 0 ? h0 : a.layers_[size_t(i - 1)].res_out;
    // The depth's mean over the rows with a target, B (T - k) of them per micro-batch's sequences.
    const float dk = dloss * float(double(T) / double(T - k)) * mtp_scaling_ / float(D);
    k_.xent_backward_inplace(m.logits, m.row_max, m.sumexp, m.tgt.data(), dk, N, V, s.vocab_valid(), s.vocab_offset());
    for (int64_t r = 0; r < N; ++r)  // rows without a target: no gradient (row bytes are whole floats: V is even)
      if (m.tgt[size_t(r)] < 0) k_.zero(reinterpret_cast<float*>(static_cast<char*>(m.logits.data) + r * V * esz),
                                        size_t(V) * esz / sizeof(float));
    k_.linear_backward(dtmp_, grad_at(layout_.head()), nullptr, m.logits, gathered(m.fin), W(layout_.head(), V * C), N,
                       C, V);
    const Tensor dln = local_grad(dtmp_);
    if (d == D - 1) clear(dres);
    else k_.convert(dres, mtp_carry_);
    norm_backward(dres, p.mtp_norm_w, -1, 0, dln, out, nullptr, m.fin_rstd);
    sum_norm_grads({p.mtp_norm_w});
    run_layer_backward(a, i, m.x, dres);  // dres: the gradient of eh_proj's output
    float* dw = sp_ ? mtp_wgrad_ : grad_at(p.eh_proj_w);
    if (sp_) k_.zero(mtp_wgrad_, size_t(2 * C * C));
    k_.linear_backward(mtp_dcat_, dw, nullptr, dres, m.cat, W(p.eh_proj_w, 2 * C * C), Nl, 2 * C, C);
    if (sp_) {  // each rank's rows: a share of the gradient
      tp_->all_reduce(mtp_wgrad_, size_t(2 * C * C), comm::DType::F32, comm::ReduceOp::Sum);
      k_.add_inplace(Tensor(grad_at(p.eh_proj_w), size_t(2 * C * C)), Tensor(mtp_wgrad_, size_t(2 * C * C)));
    }
    // The embedding half: enorm backward into dres (free now), then the embedding's gradient.
    for (int64_t r = 0; r < Nl; ++r) k_.convert(rows_of(mtp_half_, r, 1, C), rows_of(mtp_dcat_, 2 * r, 1, C));
    clear(dres);
    k_.rmsnorm_backward(dres, norm_grad(p.enorm_w, 0), mtp_half_, m.emb, W(p.enorm_w, C), m.e_rstd, Nl, C);
    embed_backward(dres, m.in_tok.data(), layout_.embedding());
    // The hidden half: hnorm backward into the carry, the previous depth's (or main) share.
    for (int64_t r = 0; r < Nl; ++r) k_.convert(rows_of(mtp_half_, r, 1, C), rows_of(mtp_dcat_, 2 * r + 1, 1, C));
    clear(mtp_carry_);
    k_.rmsnorm_backward(mtp_carry_, norm_grad(p.hnorm_w, 1), mtp_half_, prev, W(p.hnorm_w, C), m.h_rstd, Nl, C);
    sum_norm_grads({p.enorm_w, p.hnorm_w});
  }
}

}  // namespace trident::nn
