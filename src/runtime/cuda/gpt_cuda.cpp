#include "runtime/cuda/gpt_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/problems.h"
#include "runtime/cuda/attention_matmul.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_arena.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/matmul.h"

namespace trident::cuda {

const char* precision_name(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }
const char* attention_name(AttentionKind a) { return a == AttentionKind::Matmul ? "matmul" : "flash"; }

std::vector<ParamTensor> gpt_param_tensors(const GptShape& s) {
  const size_t C = s.hidden, L = s.layers;
  std::vector<ParamTensor> t;
  size_t offset = 0;
  auto add = [&](const char* name, size_t count, bool decay) {
    t.push_back({name, offset, count, decay});
    offset += count;
  };
  add("wte", size_t(s.padded_vocab()) * C, true);
  add("wpe", size_t(s.max_seq) * C, true);
  add("ln1w", L * C, false);
  add("ln1b", L * C, false);
  add("qkvw", L * 3 * C * C, true);
  add("qkvb", L * 3 * C, false);
  add("attprojw", L * C * C, true);
  add("attprojb", L * C, false);
  add("ln2w", L * C, false);
  add("ln2b", L * C, false);
  add("fcw", L * 4 * C * C, true);
  add("fcb", L * 4 * C, false);
  add("fcprojw", L * 4 * C * C, true);
  add("fcprojb", L * C, false);
  add("lnfw", C, false);
  add("lnfb", C, false);
  return t;
}

namespace {
enum P { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB };

float bf16_bits_to_float(uint16_t bits) {
  uint32_t word = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}
}  // namespace

struct GptCuda::Impl {
  GptShape shape;
  int B, Tn;
  Precision precision;
  AttentionKind attention = AttentionKind::Flash;
  size_t elem;  // bytes per element of the compute type
  cudaStream_t stream = nullptr;
  DeviceArena arena;
  std::unique_ptr<Matmul> mm;
  std::vector<ParamTensor> tensors;
  size_t P = 0;
  int step_count = 0;

  // Region indices in the arena.
  size_t r_master, r_param, r_grad, r_m, r_v;
  size_t r_res, r_ln1, r_qkv, r_atty, r_resmid, r_ln2, r_fch, r_fchg, r_lnf, r_logits, r_proj;
  size_t r_dres, r_dbuf, r_dbuf4, r_dqkv;
  size_t r_ln1_stats, r_ln2_stats, r_lnf_stats, r_lse, r_delta, r_losses, r_norm, r_tokens, r_targets;
  size_t r_probs = 0, r_att_heads = 0, r_att_scores = 0;  // AttentionKind::Matmul only
  size_t probs_per_layer() const { return size_t(B) * shape.heads * Tn * Tn; }
  template <typename T>
  AttentionMatmulScratch<T> att_scratch() const {
    return {t<T>(r_att_heads), f(r_att_scores)};
  }

  // Typed views.
  float* f(size_t r) const { return static_cast<float*>(arena.pointer(r)); }
  int* i32(size_t r) const { return static_cast<int*>(arena.pointer(r)); }
  template <typename T>
  T* t(size_t r, size_t offset_elems = 0) const {
    return static_cast<T*>(arena.pointer(r)) + offset_elems;
  }
  ElemType et() const { return precision == Precision::BF16 ? ElemType::BF16 : ElemType::F32; }
  size_t BT() const { return size_t(B) * Tn; }

  template <typename T>
  T* param(int which, int layer = 0) const {
    size_t per_layer = tensors[which].count / (which >= LN1W && which <= FCPROJB ? shape.layers : 1);
    return t<T>(r_param, tensors[which].offset + size_t(layer) * per_layer);
  }
  float* grad(int which, int layer = 0) const {
    size_t per_layer = tensors[which].count / (which >= LN1W && which <= FCPROJB ? shape.layers : 1);
    return f(r_grad) + tensors[which].offset + size_t(layer) * per_layer;
  }

  void upload_tokens(size_t region, const std::vector<int>& tokens, const char* what) {
    Problems problems;
    if (tokens.size() != BT())
      problems.add(std::string(what) + " has " + std::to_string(tokens.size()) + " ids, expected batch x seq = " +
                       std::to_string(B) + " x " + std::to_string(Tn),
                   "pass exactly batch x seq token ids");
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= shape.vocab) {
        problems.add(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) +
                         " is outside the vocabulary [0, " + std::to_string(shape.vocab) + ")",
                     "check the tokenizer and the model's vocab size");
        break;
      }
    problems.throw_if_any();
    cudaCheck(cudaMemcpyAsync(i32(region), tokens.data(), tokens.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
  }

  // One layer's saved activations and LayerNorm statistics: views into the arena that forward
  // writes and backward reads.
  template <typename T>
  struct LayerActivations {
    T *res, *ln1, *qkv, *atty, *resmid, *ln2, *fch, *fchg;
    float *ln1_stats, *ln2_stats;  // mean then rstd, BT() floats each
  };
  template <typename T>
  LayerActivations<T> layer_activations(int l) const {
    const size_t NC = BT() * size_t(shape.hidden), stats = BT();
    return {t<T>(r_res, l * NC),       t<T>(r_ln1, l * NC),        t<T>(r_qkv, l * 3 * NC),
            t<T>(r_atty, l * NC),      t<T>(r_resmid, l * NC),     t<T>(r_ln2, l * NC),
            t<T>(r_fch, l * 4 * NC),   t<T>(r_fchg, l * 4 * NC),   f(r_ln1_stats) + l * 2 * stats,
            f(r_ln2_stats) + l * 2 * stats};
  }

  template <typename T>
  void forward(bool with_loss_buffers);
  template <typename T>
  void backward(float grad_scale);
  template <typename T>
  void sync_params_from_master();
};

template <typename T>
void GptCuda::Impl::forward(bool) {
  const int C = shape.hidden, NH = shape.heads, HS = C / NH, Vp = shape.padded_vocab();
  const int N = int(BT());
  const size_t NC = BT() * C;
  const size_t stats = BT(), lse_n = size_t(B) * NH * Tn;
  const ElemType e = et();
  embedding_forward<T>(t<T>(r_res), i32(r_tokens), param<T>(WTE), param<T>(WPE), B, Tn, C, stream);
  for (int l = 0; l < shape.layers; ++l) {
    auto [res, ln1, qkv, atty, resmid, ln2, fch, fchg, s1, s2] = layer_activations<T>(l);
    T* proj = t<T>(r_proj);
    layernorm_forward<T>(ln1, s1, s1 + stats, res, param<T>(LN1W, l), param<T>(LN1B, l), N, C, stream);
    mm->linear_forward(qkv, ln1, param<T>(QKVW, l), param<T>(QKVB, l), N, C, 3 * C, e);
    if (attention == AttentionKind::Matmul)
      attention_matmul_forward<T>(*mm, atty, t<T>(r_probs, l * probs_per_layer()), qkv, att_scratch<T>(), B, Tn, NH,
                                  HS, stream);
    else
      attention_forward<T>(atty, f(r_lse) + l * lse_n, qkv, B, Tn, NH, HS, stream);
    mm->linear_forward(proj, atty, param<T>(ATTPROJW, l), param<T>(ATTPROJB, l), N, C, C, e);
    residual_forward<T>(resmid, res, proj, NC, stream);
    layernorm_forward<T>(ln2, s2, s2 + stats, resmid, param<T>(LN2W, l), param<T>(LN2B, l), N, C, stream);
    mm->linear_forward(fch, ln2, param<T>(FCW, l), param<T>(FCB, l), N, C, 4 * C, e);
    gelu_forward<T>(fchg, fch, 4 * NC, stream);
    mm->linear_forward(proj, fchg, param<T>(FCPROJW, l), param<T>(FCPROJB, l), N, 4 * C, C, e);
    residual_forward<T>(t<T>(r_res, (l + 1) * NC), resmid, proj, NC, stream);
  }
  float* sf = f(r_lnf_stats);
  layernorm_forward<T>(t<T>(r_lnf), sf, sf + stats, t<T>(r_res, shape.layers * NC), param<T>(LNFW), param<T>(LNFB), N,
                       C, stream);
  mm->linear_forward(t<T>(r_logits), t<T>(r_lnf), param<T>(WTE), nullptr, N, C, Vp, e);
}

template <typename T>
void GptCuda::Impl::backward(float grad_scale) {
  const int C = shape.hidden, NH = shape.heads, HS = C / NH, Vp = shape.padded_vocab();
  const int N = int(BT());
  const size_t NC = BT() * C;
  const size_t stats = BT(), lse_n = size_t(B) * NH * Tn;
  const ElemType e = et();
  T* logits = t<T>(r_logits);
  T* dres = t<T>(r_dres);
  T* dbuf = t<T>(r_dbuf);
  T* dbuf4 = t<T>(r_dbuf4);
  T* dqkv = t<T>(r_dqkv);
  softmax_cross_entropy<T>(f(r_losses), logits, i32(r_targets), N, shape.vocab, Vp, grad_scale / float(N), stream);
  mm->linear_backward_weight(grad(WTE), logits, t<T>(r_lnf), N, C, Vp, e);
  mm->linear_backward_input(dbuf, logits, param<T>(WTE), N, C, Vp, e);
  cudaCheck(cudaMemsetAsync(dres, 0, NC * elem, stream));
  float* sf = f(r_lnf_stats);
  layernorm_backward<T>(dres, grad(LNFW), grad(LNFB), dbuf, t<T>(r_res, shape.layers * NC), param<T>(LNFW), sf,
                        sf + stats, N, C, stream);
  for (int l = shape.layers - 1; l >= 0; --l) {
    auto [res, ln1, qkv, atty, resmid, ln2, fch, fchg, s1, s2] = layer_activations<T>(l);
    // MLP: dres is the gradient of this layer's output, which feeds both the skip and the MLP.
    mm->linear_backward_weight(grad(FCPROJW, l), dres, fchg, N, 4 * C, C, e);
    bias_backward<T>(grad(FCPROJB, l), dres, N, C, stream);
    mm->linear_backward_input(dbuf4, dres, param<T>(FCPROJW, l), N, 4 * C, C, e);
    gelu_backward<T>(dbuf4, fch, dbuf4, 4 * NC, stream);
    mm->linear_backward_weight(grad(FCW, l), dbuf4, ln2, N, C, 4 * C, e);
    bias_backward<T>(grad(FCB, l), dbuf4, N, 4 * C, stream);
    mm->linear_backward_input(dbuf, dbuf4, param<T>(FCW, l), N, C, 4 * C, e);
    layernorm_backward<T>(dres, grad(LN2W, l), grad(LN2B, l), dbuf, resmid, param<T>(LN2W, l), s2, s2 + stats, N, C,
                          stream);
    // Attention: dres is now the gradient of resmid.
    mm->linear_backward_weight(grad(ATTPROJW, l), dres, atty, N, C, C, e);
    bias_backward<T>(grad(ATTPROJB, l), dres, N, C, stream);
    mm->linear_backward_input(dbuf, dres, param<T>(ATTPROJW, l), N, C, C, e);
    if (attention == AttentionKind::Matmul)
      attention_matmul_backward<T>(*mm, dqkv, t<T>(r_probs, l * probs_per_layer()), dbuf, qkv, att_scratch<T>(), B,
                                   Tn, NH, HS, stream);
    else
      attention_backward<T>(dqkv, f(r_delta), dbuf, qkv, atty, f(r_lse) + l * lse_n, B, Tn, NH, HS, stream);
    mm->linear_backward_weight(grad(QKVW, l), dqkv, ln1, N, C, 3 * C, e);
    bias_backward<T>(grad(QKVB, l), dqkv, N, 3 * C, stream);
    mm->linear_backward_input(dbuf, dqkv, param<T>(QKVW, l), N, C, 3 * C, e);
    layernorm_backward<T>(dres, grad(LN1W, l), grad(LN1B, l), dbuf, res, param<T>(LN1W, l), s1, s1 + stats, N, C,
                          stream);
  }
  embedding_backward<T>(grad(WTE), grad(WPE), dres, i32(r_tokens), B, Tn, C, stream);
}

template <typename T>
void GptCuda::Impl::sync_params_from_master() {
  cast_from_float<T>(t<T>(r_param), f(r_master), P, stream);
  cudaCheck(cudaMemsetAsync(f(r_m), 0, P * sizeof(float), stream));
  cudaCheck(cudaMemsetAsync(f(r_v), 0, P * sizeof(float), stream));
  step_count = 0;
}

GptCuda::GptCuda(const GptShape& shape, int batch, int seq, Precision precision, double predicted_bytes,
                 AttentionKind attention)
    : impl_(std::make_unique<Impl>()) {
  Problems problems;
  if (shape.layers <= 0 || shape.hidden <= 0 || shape.heads <= 0 || shape.vocab <= 0 || shape.max_seq <= 0)
    problems.add("GPT shape has a non-positive size (layers " + std::to_string(shape.layers) + ", hidden " +
                     std::to_string(shape.hidden) + ", heads " + std::to_string(shape.heads) + ", seq " +
                     std::to_string(shape.max_seq) + ", vocab " + std::to_string(shape.vocab) + ")",
                 "give every model size a positive value");
  else if (shape.hidden % shape.heads != 0 || (shape.hidden / shape.heads) % 32 != 0 ||
           shape.hidden / shape.heads > 128)
    problems.add("head size hidden/heads = " + std::to_string(shape.hidden) + "/" + std::to_string(shape.heads) +
                     " is not a multiple of 32 up to 128, which the CUDA attention kernel needs",
                 "choose heads so that hidden/heads is 32, 64, 96 or 128");
  if (batch <= 0 || seq <= 0 || seq > shape.max_seq)
    problems.add("batch " + std::to_string(batch) + " x seq " + std::to_string(seq) +
                     " is not valid for a model with max_seq " + std::to_string(shape.max_seq),
                 "use batch >= 1 and 1 <= seq <= max_seq");
  problems.throw_if_any();

  Impl& m = *impl_;
  m.shape = shape;
  m.B = batch;
  m.Tn = seq;
  m.precision = precision;
  m.attention = attention;
  m.elem = precision == Precision::BF16 ? 2 : 4;
  m.tensors = gpt_param_tensors(shape);
  m.P = m.tensors.back().offset + m.tensors.back().count;
  cudaCheck(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));

  const size_t L = shape.layers, C = shape.hidden, NC = m.BT() * C, e = m.elem, f4 = sizeof(float);
  DeviceArena& a = m.arena;
  m.r_master = a.add("master weights (fp32)", m.P * f4);
  m.r_param = a.add(std::string("weights (") + precision_name(precision) + ")", m.P * e);
  m.r_grad = a.add("gradients (fp32)", m.P * f4);
  m.r_m = a.add("AdamW m (fp32)", m.P * f4);
  m.r_v = a.add("AdamW v (fp32)", m.P * f4);
  m.r_res = a.add("residual stream", (L + 1) * NC * e);
  m.r_ln1 = a.add("ln1 outputs", L * NC * e);
  m.r_qkv = a.add("qkv", L * 3 * NC * e);
  m.r_atty = a.add("attention outputs", L * NC * e);
  m.r_resmid = a.add("mid-layer residual", L * NC * e);
  m.r_ln2 = a.add("ln2 outputs", L * NC * e);
  m.r_fch = a.add("MLP pre-GELU", L * 4 * NC * e);
  m.r_fchg = a.add("MLP post-GELU", L * 4 * NC * e);
  m.r_lnf = a.add("final LayerNorm", NC * e);
  m.r_logits = a.add("logits", m.BT() * size_t(shape.padded_vocab()) * e);
  m.r_proj = a.add("projection scratch", NC * e);
  m.r_dres = a.add("residual gradient", NC * e);
  m.r_dbuf = a.add("gradient scratch (C)", NC * e);
  m.r_dbuf4 = a.add("gradient scratch (4C)", 4 * NC * e);
  m.r_dqkv = a.add("qkv gradient", 3 * NC * e);
  m.r_ln1_stats = a.add("ln1 mean/rstd", L * 2 * m.BT() * f4);
  m.r_ln2_stats = a.add("ln2 mean/rstd", L * 2 * m.BT() * f4);
  m.r_lnf_stats = a.add("lnf mean/rstd", 2 * m.BT() * f4);
  m.r_lse = a.add("attention log-sum-exp", L * size_t(batch) * shape.heads * seq * f4);
  m.r_delta = a.add("attention delta", size_t(batch) * shape.heads * seq * f4);
  m.r_losses = a.add("losses", m.BT() * f4);
  m.r_norm = a.add("gradient norm", f4);
  m.r_tokens = a.add("tokens", m.BT() * sizeof(int));
  m.r_targets = a.add("targets", m.BT() * sizeof(int));
  if (attention == AttentionKind::Matmul) {
    m.r_probs = a.add("attention probabilities", L * m.probs_per_layer() * e);
    m.r_att_heads = a.add("attention head scratch", AttentionMatmulScratch<float>::heads_elems(batch, seq, shape.hidden) * e);
    m.r_att_scores = a.add("attention scores (fp32)", m.probs_per_layer() * f4);
  }
  a.allocate(predicted_bytes);
  m.mm = std::make_unique<Matmul>(m.stream);
  cudaCheck(cudaMemsetAsync(a.pointer(m.r_grad), 0, m.P * f4, m.stream));
}

GptCuda::~GptCuda() {
  if (impl_ && impl_->stream) {
    cudaStreamSynchronize(impl_->stream);
    impl_->mm.reset();
    cudaStreamDestroy(impl_->stream);
  }
}

const GptShape& GptCuda::shape() const { return impl_->shape; }
int GptCuda::batch() const { return impl_->B; }
int GptCuda::seq() const { return impl_->Tn; }
Precision GptCuda::precision() const { return impl_->precision; }
const std::vector<ParamTensor>& GptCuda::tensors() const { return impl_->tensors; }
size_t GptCuda::num_params() const { return impl_->P; }
size_t GptCuda::device_bytes() const { return impl_->arena.total_bytes(); }
cudaStream_t GptCuda::stream() const { return impl_->stream; }
float* GptCuda::grads_device() { return impl_->f(impl_->r_grad); }

std::string GptCuda::memory_table() const {
  auto regions = impl_->arena.regions();
  std::sort(regions.begin(), regions.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::string text;
  char line[160];
  for (const auto& r : regions) {
    if (r.bytes < (size_t(1) << 20)) continue;
    std::snprintf(line, sizeof(line), "  %-28s %10.1f MiB\n", r.name.c_str(), double(r.bytes) / (1 << 20));
    text += line;
  }
  std::snprintf(line, sizeof(line), "  %-28s %10.1f MiB (one cudaMalloc)\n", "total",
                double(impl_->arena.total_bytes()) / (1 << 20));
  return text + line;
}

void GptCuda::init_gpt2(uint64_t seed) {
  const GptShape& s = impl_->shape;
  std::vector<float> w(impl_->P, 0.0f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const float residual_scale = 1.0f / std::sqrt(2.0f * float(s.layers));
  for (const ParamTensor& t : impl_->tensors) {
    float* p = w.data() + t.offset;
    if (t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw") {
      std::fill(p, p + t.count, 1.0f);
    } else if (t.decay) {
      size_t count = t.name == "wte" ? size_t(s.vocab) * s.hidden : t.count;  // padded rows stay zero
      float scale = (t.name == "attprojw" || t.name == "fcprojw") ? residual_scale : 1.0f;
      for (size_t i = 0; i < count; ++i) p[i] = normal(rng) * scale;
    }
  }
  set_params(w);
}

void GptCuda::set_params(const std::vector<float>& master) {
  Impl& m = *impl_;
  if (master.size() != m.P)
    throw InputError({{"parameter vector has " + std::to_string(master.size()) + " values, the model has " +
                           std::to_string(m.P),
                       "pass the parameters of a model of the same shape (gpt_param_tensors gives the layout)", ""}});
  cudaCheck(cudaMemcpyAsync(m.f(m.r_master), master.data(), m.P * sizeof(float), cudaMemcpyHostToDevice, m.stream));
  if (m.precision == Precision::BF16)
    m.sync_params_from_master<bf16>();
  else
    m.sync_params_from_master<float>();
  cudaCheck(cudaStreamSynchronize(m.stream));
}

std::vector<float> GptCuda::params() const {
  std::vector<float> out(impl_->P);
  cudaCheck(cudaMemcpyAsync(out.data(), impl_->f(impl_->r_master), out.size() * sizeof(float), cudaMemcpyDeviceToHost,
                            impl_->stream));
  cudaCheck(cudaStreamSynchronize(impl_->stream));
  return out;
}

std::vector<float> GptCuda::forward_logits(const std::vector<int>& tokens) {
  Impl& m = *impl_;
  m.upload_tokens(m.r_tokens, tokens, "tokens");
  if (m.precision == Precision::BF16)
    m.forward<bf16>(false);
  else
    m.forward<float>(false);
  const size_t Vp = m.shape.padded_vocab(), V = m.shape.vocab, rows = m.BT();
  std::vector<float> out(rows * V);
  if (m.precision == Precision::BF16) {
    std::vector<uint16_t> raw(rows * Vp);
    cudaCheck(cudaMemcpyAsync(raw.data(), m.arena.pointer(m.r_logits), raw.size() * 2, cudaMemcpyDeviceToHost, m.stream));
    cudaCheck(cudaStreamSynchronize(m.stream));
    for (size_t r = 0; r < rows; ++r)
      for (size_t v = 0; v < V; ++v) out[r * V + v] = bf16_bits_to_float(raw[r * Vp + v]);
  } else {
    std::vector<float> raw(rows * Vp);
    cudaCheck(cudaMemcpyAsync(raw.data(), m.arena.pointer(m.r_logits), raw.size() * 4, cudaMemcpyDeviceToHost, m.stream));
    cudaCheck(cudaStreamSynchronize(m.stream));
    for (size_t r = 0; r < rows; ++r) std::copy_n(raw.data() + r * Vp, V, out.data() + r * V);
  }
  return out;
}

float GptCuda::forward_backward(const std::vector<int>& tokens, const std::vector<int>& targets, float grad_scale) {
  Impl& m = *impl_;
  m.upload_tokens(m.r_tokens, tokens, "tokens");
  m.upload_tokens(m.r_targets, targets, "targets");
  if (m.precision == Precision::BF16) {
    m.forward<bf16>(true);
    m.backward<bf16>(grad_scale);
  } else {
    m.forward<float>(true);
    m.backward<float>(grad_scale);
  }
  std::vector<float> losses(m.BT());
  cudaCheck(cudaMemcpyAsync(losses.data(), m.f(m.r_losses), losses.size() * sizeof(float), cudaMemcpyDeviceToHost,
                            m.stream));
  cudaCheck(cudaStreamSynchronize(m.stream));
  double sum = 0.0;
  for (float l : losses) sum += l;
  return float(sum / double(losses.size()));
}

void GptCuda::zero_grad() {
  cudaCheck(cudaMemsetAsync(impl_->f(impl_->r_grad), 0, impl_->P * sizeof(float), impl_->stream));
}

std::vector<float> GptCuda::grads() const {
  std::vector<float> out(impl_->P);
  cudaCheck(cudaMemcpyAsync(out.data(), impl_->f(impl_->r_grad), out.size() * sizeof(float), cudaMemcpyDeviceToHost,
                            impl_->stream));
  cudaCheck(cudaStreamSynchronize(impl_->stream));
  return out;
}

float GptCuda::step(const AdamW& s) {
  Impl& m = *impl_;
  m.step_count += 1;
  float* norm = m.f(m.r_norm);
  cudaCheck(cudaMemsetAsync(norm, 0, sizeof(float), m.stream));
  sum_of_squares(norm, m.f(m.r_grad), m.P, m.stream);
  for (const ParamTensor& t : m.tensors) {
    float wd = t.decay ? s.weight_decay : 0.0f;
    float* master = m.f(m.r_master) + t.offset;
    const float* g = m.f(m.r_grad) + t.offset;
    float* mo = m.f(m.r_m) + t.offset;
    float* vo = m.f(m.r_v) + t.offset;
    if (m.precision == Precision::BF16)
      adamw_update<bf16>(master, m.t<bf16>(m.r_param, t.offset), g, mo, vo, t.count, s.lr, s.beta1, s.beta2, s.eps, wd,
                         m.step_count, norm, s.grad_clip, m.stream);
    else
      adamw_update<float>(master, m.t<float>(m.r_param, t.offset), g, mo, vo, t.count, s.lr, s.beta1, s.beta2, s.eps,
                          wd, m.step_count, norm, s.grad_clip, m.stream);
  }
  float norm_sq = 0.0f;
  cudaCheck(cudaMemcpyAsync(&norm_sq, norm, sizeof(float), cudaMemcpyDeviceToHost, m.stream));
  cudaCheck(cudaStreamSynchronize(m.stream));
  return std::sqrt(norm_sq);
}

}  // namespace trident::cuda
