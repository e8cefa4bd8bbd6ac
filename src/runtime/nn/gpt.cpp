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
  const int64_t probs = int64_t(k_.attention_probs_size(stage.B(), stage.T(), s.heads_local()));
  // First pass computes offsets (base_ == nullptr), second assigns pointers.
  auto plan = [&](float* base) {
    int64_t off = 0;
    auto take = [&](int64_t n) {
      float* p = base ? base + off : nullptr;
      off += aligned(n);
      return p;
    };
    res_in_ = take(N * C);
    layers_.clear();
    for (int64_t l = 0; l < s.num_layers(); ++l) {
      LayerActs a;
      a.ln1 = take(N * C);
      a.ln1_mean = take(N);
      a.ln1_rstd = take(N);
      a.qkv = take(N * 3 * A);
      a.probs = take(probs);
      a.atty = take(N * A);
      a.res_mid = take(N * C);
      a.ln2 = take(N * C);
      a.ln2_mean = take(N);
      a.ln2_rstd = take(N);
      a.fch = take(N * F);
      a.fch_gelu = take(N * F);
      a.res_out = take(N * C);
      layers_.push_back(a);
    }
    if (s.has_output) {
      lnf_ = take(N * C);
      lnf_mean_ = take(N);
      lnf_rstd_ = take(N);
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
GptStage::GptStage(Kernels& k, const Shard& shard, int64_t B, int64_t T, comm::Communicator* tp)
    : k_(k), layout_(shard), B_(B), T_(T), tp_(tp) {
  const Shard& s = layout_.shard();
  if (s.tp_size > 1 && (!tp || tp->size() != s.tp_size))
    throw std::invalid_argument("GptStage: tp_size " + std::to_string(s.tp_size) +
                                " needs a tensor-parallel communicator of that size");
  if (T > s.model.seq_len) throw std::invalid_argument("GptStage: T exceeds the model's seq_len");
  params_ = k_.alloc(size_t(layout_.total()));
  grads_ = k_.alloc(size_t(layout_.total()));
  const int64_t N = B * T, C = s.C(), A = s.attn_local(), F = s.ffn_local();
  dres_ = k_.alloc(size_t(N * C));
  dtmp_ = k_.alloc(size_t(N * C));
  dbig_ = k_.alloc(size_t(N * std::max(3 * A, F)));
  datty_ = k_.alloc(size_t(N * A));
  dattn_ = k_.alloc(std::max<size_t>(1, k_.attention_scratch_size(B, T, s.heads_local())));
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
}

void GptStage::zero_grads() { k_.zero(grads_, size_t(layout_.total())); }

void GptStage::all_reduce_tp(float* x, size_t n, comm::ReduceOp op) {
  if (tp_ && tp_->size() > 1) tp_->all_reduce(x, n, comm::DType::F32, op);
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
  if (s.has_input) {
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
    k_.layernorm_forward(a.lnf_, a.lnf_mean_, a.lnf_rstd_, res, P + layout_.lnf_w, P + layout_.lnf_b, N, C);
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
  const int64_t N = this->N(), C = s.C(), V = s.vocab_local();
  const float* P = params_;
  float* G = grads_;
  const int64_t L = layout_.num_layers();
  if (s.has_output) {
    const float* res = L > 0 ? a.layers_[L - 1].res_out : a.res_in_;
    k_.xent_backward_inplace(a.logits_, a.row_max_, a.sumexp_, targets, dloss, N, V, s.vocab_offset());
    k_.linear_backward(dtmp_, G + layout_.head_wte, nullptr, a.logits_, a.lnf_, P + layout_.head_wte, N, C, V);
    all_reduce_tp(dtmp_, size_t(N * C));
    k_.zero(dres_, size_t(N * C));
    k_.layernorm_backward(dres_, G + layout_.lnf_w, G + layout_.lnf_b, dtmp_, res, P + layout_.lnf_w, a.lnf_mean_,
                          a.lnf_rstd_, N, C);
  }
  for (int64_t i = L - 1; i >= 0; --i) layer_backward(a, i, i == 0 ? a.res_in_ : a.layers_[i - 1].res_out, dres_);
  if (s.has_input) {
    k_.embedding_backward(G + layout_.wte, dres_, tokens, N, C, s.vocab_offset(), V);
    k_.positions_backward(G + layout_.wpe, dres_, B_, T_, C);
  }
}

void GptStage::layer_forward(Activations& a, int64_t i, const float* res_in) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerActs& x = a.layers_[i];
  const LayerParams& p = layout_.layer(i);
  const float* P = params_;
  k_.layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, res_in, P + p.ln1_w, P + p.ln1_b, N, C);
  k_.linear_forward(x.qkv, x.ln1, P + p.qkv_w, P + p.qkv_b, N, C, 3 * A);
  k_.attention_forward(x.atty, x.probs, x.qkv, B_, T_, s.heads_local(), s.head_dim());
  // Row-parallel projection: partial sums, bias once (tp rank 0), all-reduce, then residual.
  k_.linear_forward(x.res_mid, x.atty, P + p.attn_proj_w, tp_lead() ? P + p.attn_proj_b : nullptr, N, A, C);
  all_reduce_tp(x.res_mid, size_t(N * C));
  k_.add_inplace(x.res_mid, res_in, size_t(N * C));
  k_.layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.res_mid, P + p.ln2_w, P + p.ln2_b, N, C);
  k_.linear_forward(x.fch, x.ln2, P + p.fc_w, P + p.fc_b, N, C, F);
  k_.gelu_forward(x.fch_gelu, x.fch, size_t(N * F));
  k_.linear_forward(x.res_out, x.fch_gelu, P + p.fc_proj_w, tp_lead() ? P + p.fc_proj_b : nullptr, N, F, C);
  all_reduce_tp(x.res_out, size_t(N * C));
  k_.add_inplace(x.res_out, x.res_mid, size_t(N * C));
}

void GptStage::layer_backward(Activations& a, int64_t i, const float* res_in, float* dres) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), A = s.attn_local(), F = s.ffn_local();
  const LayerActs& x = a.layers_[i];
  const LayerParams& p = layout_.layer(i);
  const float* P = params_;
  float* G = grads_;
  // MLP: fc_proj (row-parallel: no collective backward), GELU, fc (column-parallel: all-reduce dinp).
  k_.linear_backward(dbig_, G + p.fc_proj_w, G + p.fc_proj_b, dres, x.fch_gelu, P + p.fc_proj_w, N, F, C);
  k_.gelu_backward(dbig_, x.fch, dbig_, size_t(N * F));
  k_.linear_backward(dtmp_, G + p.fc_w, G + p.fc_b, dbig_, x.ln2, P + p.fc_w, N, C, F);
  all_reduce_tp(dtmp_, size_t(N * C));
  k_.layernorm_backward(dres, G + p.ln2_w, G + p.ln2_b, dtmp_, x.res_mid, P + p.ln2_w, x.ln2_mean, x.ln2_rstd, N, C);
  // Attention: projection (row-parallel), attention, QKV (column-parallel: all-reduce dinp).
  k_.linear_backward(datty_, G + p.attn_proj_w, G + p.attn_proj_b, dres, x.atty, P + p.attn_proj_w, N, A, C);
  k_.attention_backward(dbig_, dattn_, datty_, x.qkv, x.probs, x.atty, B_, T_, s.heads_local(), s.head_dim());
  k_.linear_backward(dtmp_, G + p.qkv_w, G + p.qkv_b, dbig_, x.ln1, P + p.qkv_w, N, C, 3 * A);
  all_reduce_tp(dtmp_, size_t(N * C));
  k_.layernorm_backward(dres, G + p.ln1_w, G + p.ln1_b, dtmp_, res_in, P + p.ln1_w, x.ln1_mean, x.ln1_rstd, N, C);
}

}  // namespace trident::nn
