// GPT-2 stage: forward and backward, layer by layer (see gpt.h for the contract).
#include "runtime/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "runtime/nn/init.h"

namespace trident::nn {

using kernels::Kernels;

namespace {
constexpr int64_t kAlign = 16;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

// ---------------------------------------------------------------- activations
Activations::Activations(const GptStage& stage) : k_(stage.kernels()) {
  const Shard& s = stage.shard();
  const int64_t N = stage.N(), C = s.C(), A = s.attn_local(), F = s.ffn_local(), V = s.vocab_local();
  const int64_t Nl = stage.tokens_local();  // residual-stream rows (N/tp under sequence parallelism)
  const int64_t probs = int64_t(k_.attention_probs_size(stage.B(), stage.T(), s.heads_local()));
  // First pass computes offsets (base_ == nullptr), second assigns pointers.
  auto plan = [&](float* base) {
    int64_t off = 0;
    auto take = [&](int64_t n) {
      float* p = base ? base + off : nullptr;
      off += aligned(n);
      return p;
    };
    res_in_ = take(Nl * C);
    layers_.clear();
    for (int64_t l = 0; l < s.num_layers(); ++l) {
      LayerActs a;
      a.ln1 = take(N * C);
      a.ln1_mean = take(Nl);
      a.ln1_rstd = take(Nl);
      a.qkv = take(N * 3 * A);
      a.probs = take(probs);
      a.atty = take(N * A);
      a.res_mid = take(Nl * C);
      a.ln2 = take(N * C);
      a.ln2_mean = take(Nl);
      a.ln2_rstd = take(Nl);
      a.fch = take(N * F);
      a.fch_gelu = take(N * F);
      a.res_out = take(Nl * C);
      layers_.push_back(a);
    }
    if (s.has_output) {
      lnf_ = take(N * C);
      lnf_mean_ = take(Nl);
      lnf_rstd_ = take(Nl);
      logits_ = take(N * V);
      losses_ = take(N);
      row_max_ = take(N);
      sumexp_ = take(N);
      target_logit_ = take(N);
    }
    return off;
  };
  total_ = plan(nullptr);
  base_ = k_.alloc(size_t(total_));
  plan(base_);
}

Activations::~Activations() { k_.free(base_, size_t(total_)); }

// ---------------------------------------------------------------- stage
GptStage::GptStage(Kernels& k, const Shard& shard, int64_t B, int64_t T, comm::Communicator* tp,
                   bool sequence_parallel)
    : k_(k), layout_(shard), B_(B), T_(T), tp_(tp), sp_(sequence_parallel && shard.tp_size > 1) {
  const Shard& s = layout_.shard();
  if (s.tp_size > 1 && (!tp || tp->size() != s.tp_size))
    throw std::invalid_argument("GptStage: tp_size " + std::to_string(s.tp_size) +
                                " needs a tensor-parallel communicator of that size");
  if (T > s.model.seq_len) throw std::invalid_argument("GptStage: T exceeds the model's seq_len");
  if (sp_ && T % s.tp_size != 0)
    throw std::invalid_argument("GptStage: sequence parallel needs T (" + std::to_string(T) +
                                ") divisible by tp_size (" + std::to_string(s.tp_size) + ")");
  params_ = k_.alloc(size_t(layout_.total()));
  grads_ = k_.alloc(size_t(layout_.total()));
  const int64_t N = B * T, C = s.C(), A = s.attn_local(), F = s.ffn_local();
  dres_ = k_.alloc(size_t(N * C));
  dtmp_ = k_.alloc(size_t(N * C));
  dbig_ = k_.alloc(size_t(N * std::max(3 * A, F)));
  datty_ = k_.alloc(size_t(N * A));
  dattn_ = k_.alloc(std::max<size_t>(1, k_.attention_scratch_size(B, T, s.heads_local())));
  if (sp_) {
    full_ = k_.alloc(size_t(N * C));
    pack_ = k_.alloc(size_t(N * C));
    lnout_ = k_.alloc(size_t(tokens_local() * C));
    lngrad_ = k_.alloc(size_t(4 * C));
    k_.zero(lngrad_, size_t(4 * C));
  }
}

GptStage::~GptStage() {
  const Shard& s = layout_.shard();
  const int64_t N = B_ * T_, C = s.C(), A = s.attn_local(), F = s.ffn_local();
  k_.free(params_, size_t(layout_.total()));
  k_.free(grads_, size_t(layout_.total()));
  k_.free(dres_, size_t(N * C));
  k_.free(dtmp_, size_t(N * C));
  k_.free(dbig_, size_t(N * std::max(3 * A, F)));
  k_.free(datty_, size_t(N * A));
  k_.free(dattn_, std::max<size_t>(1, k_.attention_scratch_size(B_, T_, s.heads_local())));
  if (sp_) {
    k_.free(full_, size_t(N * C));
    k_.free(pack_, size_t(N * C));
    k_.free(lnout_, size_t(tokens_local() * C));
    k_.free(lngrad_, size_t(4 * C));
  }
}

void GptStage::zero_grads() { k_.zero(grads_, size_t(layout_.total())); }

void GptStage::all_reduce_tp(float* x, size_t n, comm::ReduceOp op) {
  if (tp_ && tp_->size() > 1) tp_->all_reduce(x, n, comm::DType::F32, op);
}

// ---------------------------------------------------------------- sequence parallel
// Local row b*Ts + t of rank r is token (b, r*Ts + t); the collectives want rank r's rows as
// one contiguous block, so with B > 1 the full tensor is reordered rank-major through pack_.
void GptStage::sp_reduce_scatter(float* out, const float* full) {
  const int64_t tp = shard().tp_size, Ts = T_ / tp, C = shard().C();
  const float* send = full;
  if (B_ > 1) {
    for (int64_t r = 0; r < tp; ++r)
      for (int64_t b = 0; b < B_; ++b)
        k_.copy(pack_ + (r * B_ + b) * Ts * C, full + (b * T_ + r * Ts) * C, size_t(Ts * C));
    send = pack_;
  }
  tp_->reduce_scatter(send, out, size_t(B_ * Ts * C), comm::DType::F32, comm::ReduceOp::Sum);
}

void GptStage::sp_all_gather(float* full, const float* shard_rows) {
  const int64_t tp = shard().tp_size, Ts = T_ / tp, C = shard().C();
  if (B_ == 1) {
    tp_->all_gather(shard_rows, full, size_t(Ts * C), comm::DType::F32);
    return;
  }
  tp_->all_gather(shard_rows, pack_, size_t(B_ * Ts * C), comm::DType::F32);
  for (int64_t r = 0; r < tp; ++r)
    for (int64_t b = 0; b < B_; ++b)
      k_.copy(full + (b * T_ + r * Ts) * C, pack_ + (r * B_ + b) * Ts * C, size_t(Ts * C));
}

void GptStage::reduce_rows(float* out, const float* partial) {
  if (sp_) sp_reduce_scatter(out, partial);
  else all_reduce_tp(out, size_t(N() * shard().C()));  // partial == out
}

void GptStage::norm_full(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b) {
  const int64_t C = shard().C();
  k_.layernorm_forward(sp_ ? lnout_ : out, mean, rstd, inp, w, b, tokens_local(), C);
  if (sp_) sp_all_gather(out, lnout_);
}

const float* GptStage::full_grad(const float* dres) {
  if (!sp_) return dres;
  sp_all_gather(full_, dres);
  return full_;
}

const float* GptStage::local_grad(float* partial) {
  if (!sp_) {
    all_reduce_tp(partial, size_t(N() * shard().C()));
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
  for (int64_t off : offsets) k_.add_inplace(grads_ + off, lngrad_ + (slot++) * C, size_t(C));
  k_.zero(lngrad_, size_t(4 * C));
}

void GptStage::init_params(uint64_t seed) {
  std::vector<float> host(size_t(layout_.total()), 0.0f);
  init_gpt2(layout_, seed, host.data());
  k_.from_host(params_, host.data(), host.size());
}

void GptStage::forward(Activations& a, const int32_t* tokens, const int32_t* targets) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local();
  const float* P = params_;
  if (s.has_input && sp_) {
    // Partial lookups of the vocabulary slices, positions once (tp rank 0), reduce-scatter.
    k_.embedding_forward(full_, tokens, P + layout_.wte, N, C, s.vocab_offset(), V);
    if (tp_lead()) k_.add_positions(full_, P + layout_.wpe, B_, T_, C);
    sp_reduce_scatter(a.res_in_, full_);
  } else if (s.has_input) {
    k_.embedding_forward(a.res_in_, tokens, P + layout_.wte, N, C, s.vocab_offset(), V);
    all_reduce_tp(a.res_in_, size_t(N * C));
    k_.add_positions(a.res_in_, P + layout_.wpe, B_, T_, C);
  }
  const float* res = a.res_in_;
  for (int64_t i = 0; i < layout_.num_layers(); ++i) {
    layer_forward(a, i, res);
    res = a.layers_[i].res_out;
  }
  if (s.has_output) {
    norm_full(a.lnf_, a.lnf_mean_, a.lnf_rstd_, res, P + layout_.lnf_w, P + layout_.lnf_b);
    k_.linear_forward(a.logits_, a.lnf_, P + layout_.head_wte, nullptr, N, C, V);
    k_.xent_row_max(a.row_max_, a.logits_, N, V);
    all_reduce_tp(a.row_max_, size_t(N), comm::ReduceOp::Max);
    k_.xent_sumexp_target(a.sumexp_, a.target_logit_, a.logits_, a.row_max_, targets, N, V, s.vocab_offset());
    all_reduce_tp(a.sumexp_, size_t(N));
    all_reduce_tp(a.target_logit_, size_t(N));
    k_.xent_losses(a.losses_, a.sumexp_, a.row_max_, a.target_logit_, N);
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
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local(), Nl = tokens_local();
  const float* P = params_;
  float* G = grads_;
  const int64_t L = layout_.num_layers();
  if (s.has_output) {
    const float* res = L > 0 ? a.layers_[L - 1].res_out : a.res_in_;
    k_.xent_backward_inplace(a.logits_, a.row_max_, a.sumexp_, targets, dloss, N, V, s.vocab_offset());
    k_.linear_backward(dtmp_, G + layout_.head_wte, nullptr, a.logits_, a.lnf_, P + layout_.head_wte, N, C, V);
    const float* dln = local_grad(dtmp_);
    k_.zero(dres_, size_t(Nl * C));
    k_.layernorm_backward(dres_, norm_grad(layout_.lnf_w, 0), norm_grad(layout_.lnf_b, 1), dln, res,
                          P + layout_.lnf_w, a.lnf_mean_, a.lnf_rstd_, Nl, C);
    sum_norm_grads({layout_.lnf_w, layout_.lnf_b});
    if (grad_hook_) grad_hook_(layout_.lnf_w, layout_.total());
  }
  for (int64_t i = L - 1; i >= 0; --i) {
    layer_backward(a, i, i == 0 ? a.res_in_ : a.layers_[i - 1].res_out, dres_);
    if (grad_hook_) grad_hook_(layout_.layer(i).begin, layout_.total());
  }
  if (s.has_input) {
    const float* demb = full_grad(dres_);
    k_.embedding_backward(G + layout_.wte, demb, tokens, N, C, s.vocab_offset(), V);
    k_.positions_backward(G + layout_.wpe, demb, B_, T_, C);
    if (grad_hook_) grad_hook_(0, layout_.total());
  }
}

void GptStage::layer_forward(Activations& a, int64_t i, const float* res_in) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerActs& x = a.layers_[i];
  const LayerParams& p = layout_.layer(i);
  const float* P = params_;
  const int64_t Nl = tokens_local();
  // Under sequence parallelism the row-parallel partial sums go to full_ and are reduce-scattered.
  float* mid = sp_ ? full_ : x.res_mid;
  float* out = sp_ ? full_ : x.res_out;
  norm_full(x.ln1, x.ln1_mean, x.ln1_rstd, res_in, P + p.ln1_w, P + p.ln1_b);
  k_.linear_forward(x.qkv, x.ln1, P + p.qkv_w, P + p.qkv_b, N, C, 3 * A);
  k_.attention_forward(x.atty, x.probs, x.qkv, B_, T_, s.heads_local(), s.head_dim());
  // Row-parallel projection: partial sums, bias once (tp rank 0), all-reduce, then residual.
  k_.linear_forward(mid, x.atty, P + p.attn_proj_w, tp_lead() ? P + p.attn_proj_b : nullptr, N, A, C);
  reduce_rows(x.res_mid, mid);
  k_.add_inplace(x.res_mid, res_in, size_t(Nl * C));
  norm_full(x.ln2, x.ln2_mean, x.ln2_rstd, x.res_mid, P + p.ln2_w, P + p.ln2_b);
  k_.linear_forward(x.fch, x.ln2, P + p.fc_w, P + p.fc_b, N, C, F);
  k_.gelu_forward(x.fch_gelu, x.fch, size_t(N * F));
  k_.linear_forward(out, x.fch_gelu, P + p.fc_proj_w, tp_lead() ? P + p.fc_proj_b : nullptr, N, F, C);
  reduce_rows(x.res_out, out);
  k_.add_inplace(x.res_out, x.res_mid, size_t(Nl * C));
}

void GptStage::layer_backward(Activations& a, int64_t i, const float* res_in, float* dres) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerActs& x = a.layers_[i];
  const LayerParams& p = layout_.layer(i);
  const float* P = params_;
  float* G = grads_;
  // MLP: fc_proj (row-parallel: no collective backward), GELU, fc (column-parallel: all-reduce dinp).
  // Sequence parallel: dres holds the local rows; the linears read it gathered (full_grad), the
  // column-parallel input gradients are reduce-scattered (local_grad) instead of all-reduced.
  const int64_t Nl = tokens_local();
  k_.linear_backward(dbig_, G + p.fc_proj_w, G + p.fc_proj_b, full_grad(dres), x.fch_gelu, P + p.fc_proj_w, N, F, C);
  k_.gelu_backward(dbig_, x.fch, dbig_, size_t(N * F));
  k_.linear_backward(dtmp_, G + p.fc_w, G + p.fc_b, dbig_, x.ln2, P + p.fc_w, N, C, F);
  k_.layernorm_backward(dres, norm_grad(p.ln2_w, 0), norm_grad(p.ln2_b, 1), local_grad(dtmp_), x.res_mid,
                        P + p.ln2_w, x.ln2_mean, x.ln2_rstd, Nl, C);
  // Attention: projection (row-parallel), attention, QKV (column-parallel: all-reduce dinp).
  k_.linear_backward(datty_, G + p.attn_proj_w, G + p.attn_proj_b, full_grad(dres), x.atty, P + p.attn_proj_w, N, A,
                     C);
  k_.attention_backward(dbig_, dattn_, datty_, x.qkv, x.probs, x.atty, B_, T_, s.heads_local(), s.head_dim());
  k_.linear_backward(dtmp_, G + p.qkv_w, G + p.qkv_b, dbig_, x.ln1, P + p.qkv_w, N, C, 3 * A);
  k_.layernorm_backward(dres, norm_grad(p.ln1_w, 2), norm_grad(p.ln1_b, 3), local_grad(dtmp_), res_in, P + p.ln1_w,
                        x.ln1_mean, x.ln1_rstd, Nl, C);
  sum_norm_grads({p.ln2_w, p.ln2_b, p.ln1_w, p.ln1_b});  // slots 0..3 in this order
}

}  // namespace trident::nn
