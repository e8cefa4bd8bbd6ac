// ParamLayout: offsets of every tensor of a shard in the flat buffer (see param_layout.h).
#include "runtime/nn/param_layout.h"

#include <algorithm>

namespace trident::nn {

namespace {
constexpr int64_t kAlign = 16;  // floats (64 bytes)
}

int64_t ParamLayout::add(const std::string& name, int64_t rows, int64_t cols, ParamKind kind, bool tp_sharded) {
  const int64_t offset = (total_ + kAlign - 1) / kAlign * kAlign;
  tensors_.push_back({name, offset, rows, cols, kind, tp_sharded, tp_sharded ? 1 : shard_.tp_size});
  total_ = offset + rows * cols;
  return offset;
}

// The router, the shared experts (split over tp) and this shard's routed experts, its slices of
// them over etp (see param_layout.h). The routed experts come last: [fc_w, end) is the expert range.
void ParamLayout::add_experts(LayerParams& lp, const std::string& p) {
  const Shard& s = shard_;
  const int64_t C = s.C(), E = s.experts_local(), F = s.expert_ffn_local();
  const bool tp = s.tp_size > 1;
  lp.moe = true;
  lp.router_w = add(p + "router_w", s.model.experts, C, ParamKind::Matrix, false);
  if (s.model.router_bias) lp.router_b = add(p + "router_b", s.model.experts, 1, ParamKind::Bias, false);
  if (s.has_shared_experts()) {
    const int64_t Fs = s.shared_ffn_local();
    if (s.llama()) {
      lp.shared_fc_w = add(p + "shared.gate_up_w", 2 * Fs, C, ParamKind::Matrix, tp);
    } else {
      lp.shared_fc_w = add(p + "shared.fc_w", Fs, C, ParamKind::Matrix, tp);
      lp.shared_fc_b = add(p + "shared.fc_b", Fs, 1, ParamKind::Bias, tp);
    }
    lp.shared_proj_w = add(p + "shared.fc_proj_w", C, Fs, ParamKind::Matrix, tp);
    if (!s.llama()) lp.shared_proj_b = add(p + "shared.fc_proj_b", C, 1, ParamKind::Bias, false);
  }
  // tp ranks hold different experts (or slices, or EDP replicas): not tp copies of one another.
  const bool own = tp, bias = s.model.has_mlp_bias();
  if (s.llama()) {
    lp.fc_w = add(p + "experts.gate_up_w", E * 2 * F, C, ParamKind::Matrix, own);
    if (bias) lp.fc_b = add(p + "experts.gate_up_b", E * 2 * F, 1, ParamKind::Bias, own);  // GPT-OSS
  } else {
    lp.fc_w = add(p + "experts.fc_w", E * F, C, ParamKind::Matrix, own);
    lp.fc_b = add(p + "experts.fc_b", E * F, 1, ParamKind::Bias, own);
  }
  lp.fc_proj_w = add(p + "experts.fc_proj_w", E * C, F, ParamKind::Matrix, own);
  if (bias) {
    lp.fc_proj_b = add(p + "experts.fc_proj_b", E * C, 1, ParamKind::Bias, own);
    tensors_.back().etp_copies = s.etp_size;
  }
  for (auto it = tensors_.rbegin(); it != tensors_.rend() && it->offset >= lp.fc_w; ++it) it->expert = true;
}

ParamLayout::ParamLayout(const Shard& shard) : shard_(shard) {
  const Shard& s = shard_;
  const int64_t C = s.C(), A = s.attn_local(), F = s.ffn_local(), V = s.vocab_local();
  const bool tp = s.tp_size > 1;
  if (s.llama()) {
    if (s.has_input) wte = add("wte", V, C, ParamKind::Embedding, tp);
    for (int64_t l = s.first_layer; l < s.end_layer() + s.mtp_count(); ++l) {
      const int64_t gl = l < s.end_layer() ? l : s.model.layers + (l - s.end_layer());  // MTP: after the model's
      const std::string p = "layers." + std::to_string(gl) + ".";
      LayerParams lp;
      lp.begin = (total_ + kAlign - 1) / kAlign * kAlign;
      if (gl >= s.model.layers) {  // before the layer's own tensors: the experts close a layer
        lp.enorm_w = add(p + "enorm_w", C, 1, ParamKind::Norm, false);
        lp.hnorm_w = add(p + "hnorm_w", C, 1, ParamKind::Norm, false);
        lp.eh_proj_w = add(p + "eh_proj_w", C, 2 * C, ParamKind::Matrix, false);
        lp.mtp_norm_w = add(p + "mtp_norm_w", C, 1, ParamKind::Norm, false);
      }
      lp.ln1_w = add(p + "ln1_w", C, 1, ParamKind::Norm, false);
      if (s.mla()) {  // DeepSeek-V3's attention (see param_layout.h)
        const ModelSpec& m = s.model;
        if (m.q_lora_rank > 0) {
          lp.q_a_w = add(p + "q_a_w", m.q_lora_rank, C, ParamKind::Matrix, false);
          lp.q_a_norm_w = add(p + "q_a_norm_w", m.q_lora_rank, 1, ParamKind::Norm, false);
          lp.q_b_w = add(p + "q_b_w", A, m.q_lora_rank, ParamKind::Matrix, tp);
        } else {
          lp.q_w = add(p + "q_w", A, C, ParamKind::Matrix, tp);
        }
        lp.kv_a_w = add(p + "kv_a_w", m.kv_lora_rank + m.qk_rope_head_dim, C, ParamKind::Matrix, false);
        lp.kv_a_norm_w = add(p + "kv_a_norm_w", m.kv_lora_rank, 1, ParamKind::Norm, false);
        lp.kv_b_w = add(p + "kv_b_w", s.mla_kv_b_local(), m.kv_lora_rank, ParamKind::Matrix, tp);
      } else {
        lp.q_w = add(p + "q_w", A, C, ParamKind::Matrix, tp);
        lp.kv_w = add(p + "kv_w", s.kv_local(), C, ParamKind::Matrix, tp && s.kv_replicas() < s.tp_size);
        tensors_.back().tp_copies = s.kv_replicas();
        if (s.model.has_qkv_bias()) {  // Qwen2, GPT-OSS: split with the heads like q_w and kv_w
          lp.q_b = add(p + "q_b", A, 1, ParamKind::Bias, tp);
          lp.kv_b = add(p + "kv_b", s.kv_local(), 1, ParamKind::Bias, tp && s.kv_replicas() < s.tp_size);
          tensors_.back().tp_copies = s.kv_replicas();
        }
      }
      if (s.model.qk_norm) {  // one weight per head feature, shared by all heads: replicated over tp
        lp.q_norm_w = add(p + "q_norm_w", s.head_dim(), 1, ParamKind::Norm, false);
        lp.k_norm_w = add(p + "k_norm_w", s.head_dim(), 1, ParamKind::Norm, false);
      }
      // GPT-OSS's sinks: a logit per head, no decay, zero at init (Bias), split with the heads.
      if (s.model.attention_sinks) lp.sinks = add(p + "sinks", s.heads_local(), 1, ParamKind::Bias, tp);
      lp.attn_proj_w = add(p + "attn_proj_w", C, s.out_local(), ParamKind::Matrix, tp);
      if (s.model.has_proj_bias()) lp.attn_proj_b = add(p + "attn_proj_b", C, 1, ParamKind::Bias, false);
      lp.ln2_w = add(p + "ln2_w", C, 1, ParamKind::Norm, false);
      if (s.moe_layer(gl)) {
        add_experts(lp, p);
      } else {
        lp.fc_w = add(p + "gate_up_w", 2 * F, C, ParamKind::Matrix, tp);
        if (s.model.has_mlp_bias()) lp.fc_b = add(p + "gate_up_b", 2 * F, 1, ParamKind::Bias, tp);
        lp.fc_proj_w = add(p + "fc_proj_w", C, F, ParamKind::Matrix, tp);
        if (s.model.has_mlp_bias()) lp.fc_proj_b = add(p + "fc_proj_b", C, 1, ParamKind::Bias, false);
      }
      lp.end = total_;
      layers_.push_back(lp);
    }
    if (s.has_output) {
      lnf_w = add("lnf_w", C, 1, ParamKind::Norm, false);
      head_w = add("head_w", V, C, ParamKind::Embedding, tp);
      if (s.mtp_count() > 0 && !s.has_input) head_wte = add("head_wte", V, C, ParamKind::Embedding, tp);
    }
    total_ = (total_ + kAlign - 1) / kAlign * kAlign;
    make_units();
    return;
  }
  if (s.has_input) {
    wte = add("wte", V, C, ParamKind::Embedding, tp);
    wpe = add("wpe", s.model.seq_len, C, ParamKind::Embedding, false);
  }
  for (int64_t l = s.first_layer; l < s.end_layer(); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerParams lp;
    lp.begin = (total_ + kAlign - 1) / kAlign * kAlign;
    lp.ln1_w = add(p + "ln1_w", C, 1, ParamKind::Norm, false);
    lp.ln1_b = add(p + "ln1_b", C, 1, ParamKind::Norm, false);
    lp.qkv_w = add(p + "qkv_w", 3 * A, C, ParamKind::Matrix, tp);
    lp.qkv_b = add(p + "qkv_b", 3 * A, 1, ParamKind::Bias, tp);
    lp.attn_proj_w = add(p + "attn_proj_w", C, A, ParamKind::Matrix, tp);
    lp.attn_proj_b = add(p + "attn_proj_b", C, 1, ParamKind::Bias, false);
    lp.ln2_w = add(p + "ln2_w", C, 1, ParamKind::Norm, false);
    lp.ln2_b = add(p + "ln2_b", C, 1, ParamKind::Norm, false);
    if (s.moe_layer(l)) {
      add_experts(lp, p);
    } else {
      lp.fc_w = add(p + "fc_w", F, C, ParamKind::Matrix, tp);
      lp.fc_b = add(p + "fc_b", F, 1, ParamKind::Bias, tp);
      lp.fc_proj_w = add(p + "fc_proj_w", C, F, ParamKind::Matrix, tp);
      lp.fc_proj_b = add(p + "fc_proj_b", C, 1, ParamKind::Bias, false);
    }
    lp.end = total_;
    layers_.push_back(lp);
  }
  if (s.has_output) {
    lnf_w = add("lnf_w", C, 1, ParamKind::Norm, false);
    lnf_b = add("lnf_b", C, 1, ParamKind::Norm, false);
    head_wte = s.has_input ? wte : add("head_wte", V, C, ParamKind::Embedding, tp);
  }
  total_ = (total_ + kAlign - 1) / kAlign * kAlign;
  make_units();
}

void ParamLayout::make_units() {
  for (const LayerParams& l : layers_)
    if (l.moe) expert_ranges_.push_back({l.fc_w, l.end});
  std::vector<int64_t> cuts{0};
  for (const LayerParams& l : layers_) cuts.push_back(l.begin);
  if (!layers_.empty()) cuts.push_back((layers_.back().end + kAlign - 1) / kAlign * kAlign);
  cuts.push_back(total_);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    if (cuts[i + 1] > cuts[i]) units_.push_back({cuts[i], cuts[i + 1]});
}

int64_t ParamLayout::unit_of(int64_t offset) const {
  auto it = std::upper_bound(units_.begin(), units_.end(), offset,
                             [](int64_t x, const Unit& u) { return x < u.begin; });
  return int64_t(it - units_.begin()) - 1;
}

namespace {
bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
}  // namespace

ParamLayout::Global ParamLayout::global_index(const Shard& s, const TensorView& view, int64_t r, int64_t c) {
  const int64_t A = s.attn_local(), F = s.ffn_local(), hd = s.head_dim(), tr = s.tp_rank;
  const int64_t Q = s.model.heads * hd;  // all heads' width (C unless the model sets head_dim)
  Global g{view.name == "head_wte" ? "wte" : view.name, r, c, view.rows, view.cols};
  const std::string& n = g.name;
  if (n.find(".experts.") != std::string::npos) {  // split by expert over ep, each expert over etp
    // Local row r is row `within` of local expert r / per, global expert e.
    const int64_t El = s.experts_local(), per = view.rows / El, e = s.ep_rank * El + r / per, within = r % per;
    const int64_t F = s.expert_ffn(), Fl = s.expert_ffn_local(), at = s.etp_rank * Fl;
    g.rows = per * s.etp_size * s.model.experts;  // FC1's rows are split over etp, FC2's are not
    if (ends_with(n, "gate_up_w") || ends_with(n, "gate_up_b"))
      g.row = e * 2 * F + (within < Fl ? at + within : F + at + within - Fl);
    else if (ends_with(n, "fc_w") || ends_with(n, "fc_b")) g.row = e * F + at + within;
    else g.rows = per * s.model.experts, g.row = e * per + within;  // fc_proj_w, fc_proj_b: [C] per expert
    if (ends_with(n, "fc_proj_w")) g.col = at + c, g.cols = F;
    return g;
  }
  if (ends_with(n, "router_w") || ends_with(n, "router_b")) return g;
  if (n.find(".shared.") != std::string::npos) {  // one MLP of Fs columns, split over tp
    const int64_t Fs = s.shared_ffn_local(), all = s.model.shared_experts * s.expert_ffn();
    if (ends_with(n, "gate_up_w")) g.row = r < Fs ? tr * Fs + r : all + tr * Fs + (r - Fs), g.rows = 2 * all;
    else if (ends_with(n, "fc_proj_w")) g.col = tr * Fs + c, g.cols = all;
    else if (ends_with(n, "fc_w") || ends_with(n, "fc_b")) g.row = tr * Fs + r, g.rows = all;
    return g;  // fc_proj_b: replicated
  }
  if (n == "wte" || n == "head_w") g.row = s.vocab_offset() + r, g.rows = s.model.vocab;
  else if (ends_with(n, "qkv_w") || ends_with(n, "qkv_b")) g.row = (r / A) * Q + tr * A + r % A, g.rows = 3 * Q;
  else if (ends_with(n, "q_w") || ends_with(n, "q_b_w") || ends_with(n, ".q_b")) g.row = tr * A + r, g.rows = Q;
  else if (ends_with(n, "kv_b_w")) g.row = tr * s.mla_kv_b_local() + r, g.rows = s.model.heads * s.mla_kv_b_local() / s.heads_local();
  else if (ends_with(n, "sinks")) g.row = tr * s.heads_local() + r, g.rows = s.model.heads;
  else if (ends_with(n, "kv_w") || ends_with(n, ".kv_b")) {
    const int64_t K = s.kv_heads_local() * hd, first = s.kv_head_first() * hd;
    g.row = r < K ? first + r : s.kv_heads() * hd + first + (r - K);
    g.rows = 2 * s.kv_heads() * hd;
  } else if (ends_with(n, "gate_up_w") || ends_with(n, "gate_up_b")) {
    g.row = r < F ? tr * F + r : s.model.ffn_hidden + tr * F + (r - F);
    g.rows = 2 * s.model.ffn_hidden;
  } else if (ends_with(n, "fc_w") || ends_with(n, "fc_b")) g.row = tr * F + r, g.rows = s.model.ffn_hidden;
  else if (ends_with(n, "attn_proj_w")) g.col = tr * s.out_local() + c, g.cols = s.model.heads * s.out_local() / s.heads_local();
  else if (ends_with(n, "fc_proj_w")) g.col = tr * F + c, g.cols = s.model.ffn_hidden;
  return g;
}

const TensorView* ParamLayout::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace trident::nn
