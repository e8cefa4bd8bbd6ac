// Writes what the PyTorch reference test (reference_test.py) checks Trident against:
// a small GPT's initial weights, a batch, Trident's logits, loss and every gradient for that
// batch, then the losses of 10 AdamW steps (warm-up, cosine, clipping) on fixed batches.
// Output: OUT.json (config + names, shapes and offsets) and OUT.bin (float32 / int32 arrays).
// --device cuda runs the same model on the GPU (CudaKernels), --precision bf16 in bf16 mixed
// precision there (the arrays are still written as fp32: master weights, gradients, logits).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/problems.h"
#include "runtime/data/sampler.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/init.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"
#ifdef TRIDENT_HAVE_CUDA
#include "runtime/cuda/cuda_kernels.h"
#endif

using namespace trident;

namespace {
// The batches below as the trainer asks for them: micro-batch j of a step = sequences [j*B, (j+1)*B).
struct FnSource final : parallel::BatchSource {
  std::function<void(int64_t, int64_t, int32_t*, int32_t*)> fn;
  int64_t B = 1;
  void fill(int64_t step, int64_t first, int64_t, int32_t* tok, int32_t* tgt) const override { fn(step, first / B, tok, tgt); }
  std::string describe() const override { return "reference batches"; }
};
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  std::string device = "cpu", precision = "fp32", family = "gpt";
  bool moe = false, qwen3 = false, gpt_oss = false, llama3_rope = false, deepseek_router = false, group_limited = false,
       deepseek_v3 = false, gpt_oss_model = false, yarn = false;
  int64_t shared_experts = 0, moe_layer_freq = 1, mtp = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--device" || a == "--precision") && i + 1 < argc) (a == "--device" ? device : precision) = argv[++i];
    else if (a == "--family" && i + 1 < argc) family = argv[++i];
    else if (a == "--moe") moe = true;
    else if (a == "--qwen3-moe") qwen3 = true;
    else if (a == "--gpt-oss-attention") gpt_oss = true;
    else if (a == "--gpt-oss") gpt_oss = gpt_oss_model = true;
    else if (a == "--llama3-rope") llama3_rope = true;
    else if (a == "--deepseek-router") deepseek_router = true;
    else if (a == "--group-limited") group_limited = true;
    else if (a == "--deepseek-v3") deepseek_v3 = true;
    else if (a == "--yarn") yarn = true;
    else if (a == "--shared-experts" && i + 1 < argc) shared_experts = std::atoll(argv[++i]);
    else if (a == "--moe-layer-freq" && i + 1 < argc) moe_layer_freq = std::atoll(argv[++i]);
    else if (a == "--mtp" && i + 1 < argc) mtp = std::atoll(argv[++i]);
    else args.push_back(a);
  }
  if (args.empty() || args.size() > 2 || (device != "cpu" && device != "cuda") ||
      (precision != "fp32" && precision != "bf16") || (family != "gpt" && family != "llama") ||
      (qwen3 && (family != "llama" || moe)) || (gpt_oss && family != "llama") || (llama3_rope && family != "llama") ||
      (deepseek_router && !qwen3) || (group_limited && !deepseek_router && !deepseek_v3) || (mtp > 0 && family != "llama") ||
      (deepseek_v3 && (family != "llama" || moe || qwen3)) || (gpt_oss_model && (moe || qwen3 || deepseek_v3)) ||
      (yarn && (family != "llama" || llama3_rope))) {
    std::fprintf(stderr, "usage: reference_dump OUT_PREFIX [TOKEN_FILE] [--device cpu|cuda] [--precision fp32|bf16]"
                         " [--family gpt|llama] [--moe [--shared-experts N] [--moe-layer-freq N]]\n"
                         "  [--family llama --qwen3-moe] [--family llama --gpt-oss-attention [--moe]] [--family llama --gpt-oss]\n"
                         "  [--family llama --llama3-rope] [--family llama --qwen3-moe --deepseek-router]\n"
                         "  [--family llama ... --mtp D] [... --deepseek-router --group-limited]\n"
                         "  [--family llama --deepseek-v3 [--group-limited] [--mtp D]] [--family llama ... --yarn]\n"
                         "  with a token file: the default `trident train` model on real text, 8 steps\n");
    return 2;
  }
  const std::string prefix = args[0];
  ModelSpec m;
  // Head size 32: the CUDA attention kernel's smallest, so one config serves every device.
  m.layers = 2, m.hidden = 64, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 256, m.seq_len = 80, m.vocab = 96;
  if (family == "llama") {
    // Grouped-query attention (4 query heads share 2 kv heads), SwiGLU width not a multiple of C.
    m.family = ModelFamily::Llama, m.heads = 4, m.kv_heads = 2, m.ffn_hidden = 176, m.rope_theta = 500000.0;
  }
  if (llama3_rope) {
    // Llama 3.1's rope scaling over an original context of 64 (the sequence is 80): of the 8
    // pairs of a 16-wide head, pair 0 keeps its frequency (wavelength 6 < 64/4), pair 1 is
    // smoothed (32, between 16 and 64), pairs 2-7 are slowed 8x.
    m.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  }
  parallel::TrainerOptions o;
  if (moe) {
    // 3 layers, the first dense; 4 experts, top-2. GPT: raw chosen scores as weights, capacity
    // factor 1 (tokens dropped); Llama: weights over their sum, no dropping.
    m.layers = 3, m.experts = 4, m.experts_per_token = 2, m.expert_ffn_hidden = 48, m.moe_dense_layers = 1;
    m.capacity_factor = 1.0;
    o.moe.aux_coeff = 0.05, o.moe.z_coeff = 0.01;
    o.moe.normalise = family == "llama";
    o.moe.drop = family != "llama";
    m.shared_experts = shared_experts;  // every token's besides its top-k: one MLP of N x 48 columns
    if (moe_layer_freq > 1) {
      // 4 layers, the first dense, then every N-th a MoE layer: dense layers between MoE ones.
      m.layers = 4, m.moe_layer_freq = moe_layer_freq;
    }
  }
  if (qwen3) {
    // Qwen3-MoE's shape, small: heads of 32 on hidden 64 (4 x 32 = 128 query features, not 64),
    // QK-norm, rope theta 1e6, norm epsilon 1e-6; every layer a MoE layer of 8 experts, top-2,
    // weights normalised over the two (norm_topk_prob), no dropping.
    m.head_size = 32, m.qk_norm = true, m.rope_theta = 1e6, m.norm_eps = 1e-6;
    m.layers = 2, m.experts = 8, m.experts_per_token = 2, m.expert_ffn_hidden = 32, m.moe_dense_layers = 0;
    o.moe.aux_coeff = 0.01, o.moe.z_coeff = 0.001;
    o.moe.normalise = true, o.moe.drop = false;
  }
  if (gpt_oss) {
    // GPT-OSS's attention, small: a sliding window of 24 keys (the sequence is 80) on layers 0
    // and 2, full attention on layer 1 (layer_types alternating), a sink per head.
    m.sliding_window = 24, m.full_attention_every = 2, m.attention_sinks = true;
    if (!moe) m.layers = 3;
  }
  if (gpt_oss_model) {
    // GPT-OSS's whole layer, small: that attention with biases on q, k, v and o; a first dense
    // layer (Trident's, to check the dense MLP's biases too), then MoE layers of 8 experts top-2
    // with biases, the router's bias, top-k weights softmaxed over the k (= normalised), and the
    // clamped unit at 0.2, inside the gate and up values' spread (about 0.2 here), so both the
    // clamped and the free paths are taken. Biases and sinks start non-zero (below).
    m.layers = 3, m.experts = 8, m.experts_per_token = 2, m.expert_ffn_hidden = 32, m.moe_dense_layers = 1;
    m.qkv_bias = m.proj_bias = m.mlp_bias = 1, m.router_bias = true, m.activation_clamp = 0.2;
    o.moe.aux_coeff = 0.01, o.moe.z_coeff = 0.001;
    o.moe.normalise = true, o.moe.drop = false;
  }
  if (deepseek_router) {
    // DeepSeek-V3's router on that shape: sigmoid scores, top-2 of score + expert bias (set below
    // to values that change the choice; each step moves it by 0.01 towards the mean load),
    // weights normalised and scaled by 2.5.
    m.router_score = "sigmoid", m.router_expert_bias = true, m.router_topk_scaling = 2.5;
    o.moe.bias_update_rate = 0.01;
  }
  if (group_limited) {
    // DeepSeek-V3's group-limited routing, small: 8 experts in 4 groups, each token's top-4 within
    // its best 2 groups by the sum of each group's top 4 / 2 = 2 biased scores (HF's noaux_tc and
    // Megatron-Core's group_limited_topk agree at k / topk_group = 2).
    m.experts_per_token = 4, m.router_groups = 4, m.router_group_topk = 2;
    o.moe.groups = 4, o.moe.group_topk = 2;
  }
  if (mtp > 0) {
    // DeepSeek-V3's multi-token prediction: D layers of the last layer's kind after the model,
    // their losses weighted 0.3 / D (not Megatron's 0.1, so a wrong weight shows more).
    m.mtp_layers = mtp;
    o.mtp_loss_scaling = 0.3;
  }
  if (deepseek_v3) {
    // DeepSeek-V3's shape, small: multi-head latent attention (4 heads, q_lora 32, kv_lora 16,
    // nope 16 + rope 8 query/key heads, values of 16), a first dense layer, then a MoE layer of 8
    // experts top-2 and one shared expert, the sigmoid router with its bias, normalised, x 2.5.
    m.q_lora_rank = 32, m.kv_lora_rank = 16, m.qk_nope_head_dim = 16, m.qk_rope_head_dim = 8, m.v_head_dim = 16;
    m.kv_heads = m.heads, m.rope_theta = 10000.0, m.norm_eps = 1e-6;
    // With --group-limited: top-4 within the best 2 of 4 groups (set above), as DeepSeek-V3's k = 2 x topk_group.
    m.layers = 2, m.experts = 8, m.experts_per_token = group_limited ? 4 : 2, m.expert_ffn_hidden = 32;
    m.moe_dense_layers = 1, m.shared_experts = 1;
    m.router_score = "sigmoid", m.router_expert_bias = true, m.router_topk_scaling = 2.5;
    o.moe.aux_coeff = 0.01, o.moe.z_coeff = 0.001, o.moe.bias_update_rate = 0.01;
    o.moe.normalise = true, o.moe.drop = false;
  }
  // YaRN as the released configs give it (rope_scaling written back as they do): with --deepseek-v3
  // DeepSeek-V3's (factor 40, mscale = mscale_all_dim = 1: attention factor 1, MLA's softmax scale
  // x 1.874), else GPT-OSS's (factor 32, truncate false: attention factor 1.347). Over the 8-pair
  // rope part of 16 (GPT-OSS-like, theta 500000) or the 4-pair one of 8 (DeepSeek, theta 10000) the
  // ramp leaves pairs extrapolated, blended and interpolated.
  nlohmann::json yarn_config;
  if (yarn && deepseek_v3) {
    m.rope_scaling = RopeScaling{"yarn", 40.0, 1.0, 1.0, 4096, 32.0, 1.0, 1.0, 1.0, true};
    yarn_config = {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 4096}, {"beta_fast", 32},
                   {"beta_slow", 1}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
  } else if (yarn) {
    m.rope_scaling = RopeScaling{"yarn", 32.0, 1.0, 1.0, 4096, 32.0, 1.0, 1.0, 0.0, false};
    yarn_config = {{"rope_type", "yarn"}, {"factor", 32.0}, {"original_max_position_embeddings", 4096},
                   {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false}};
  }
  int64_t B = 3, accum = 2, steps = 10;
  engine::AdamWConfig opt;
  opt.lr = 3e-3, opt.min_lr = 3e-4, opt.warmup_steps = 3, opt.decay_steps = steps, opt.weight_decay = 0.1,
  opt.grad_clip = 1.0;
  std::unique_ptr<data::TokenFile> file;
  std::unique_ptr<data::BatchSampler> sampler;
  if (args.size() == 2) {
    file = std::make_unique<data::TokenFile>(args[1]);
    m.layers = 4, m.hidden = 256, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 1024, m.seq_len = 256, m.vocab = 256;
    B = 8, accum = 1, steps = 8;
    opt.lr = 1e-3, opt.min_lr = 1e-4, opt.warmup_steps = 0, opt.decay_steps = steps;
    sampler = std::make_unique<data::BatchSampler>(*file, data::train_split(*file, m.seq_len), m.seq_len, 1, 0);
  }
  std::unique_ptr<kernels::Kernels> k;
  try {
    if (device == "cuda") {
#ifdef TRIDENT_HAVE_CUDA
      k = cuda::make_cuda_kernels();
#else
      std::fprintf(stderr, "reference_dump: this build has no CUDA backend\n");
      return 2;
#endif
    } else {
      k = kernels::make_cpu_kernels(2);
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "reference_dump: %s\n", e.what());
    return 2;
  }
  const kernels::DType dtype = precision == "bf16" ? kernels::DType::BF16 : kernels::DType::F32;
  if (!k->supports(dtype)) {
    std::fprintf(stderr, "reference_dump: %s cannot compute in %s\n", k->device_name().c_str(), precision.c_str());
    return 2;
  }
  const int64_t N = B * m.seq_len;
  auto batch = [&](int64_t step, int64_t micro, int32_t* tok, int32_t* tgt) {
    if (sampler) return sampler->fill(step == 999 ? 0 : step, micro * B, B, tok, tgt);
    for (int64_t i = 0; i < N; ++i) {
      tok[i] = int32_t(nn::mix64(uint64_t(step * 1000 + micro) * 100003 + uint64_t(i)) % uint64_t(m.vocab));
      tgt[i] = int32_t(nn::mix64(uint64_t(step * 1000 + micro) * 100003 + uint64_t(i) + 7777777) % uint64_t(m.vocab));
    }
  };
  // The one trainer, as `trident train` runs one process (a world of one).
  RunSpec run;
  run.model = m;
  run.exec.micro_batch_size = B, run.exec.global_batch_size = B * accum, run.exec.precision = Precision::FP32;
  parallel::ProcessGroups groups = parallel::make_single_process_groups(std::make_shared<comm::CommContext>());
  FnSource source;
  source.fn = batch;
  source.B = B;
  o.adamw = opt;
  o.seed = 1234;
  o.kernels = k.get();
  o.compute = dtype;
  parallel::DistTrainer trainer(run, groups, source, o);
  nn::GptStage& g = trainer.chunk_stage(0);
  const int64_t P = g.layout().total();
  std::vector<std::vector<float>> bias0 = trainer.expert_bias();
  for (size_t l = 0; l < bias0.size(); ++l)
    for (size_t e = 0; e < bias0[l].size(); ++e) bias0[l][e] = 0.03f * float(int((e * 5 + l * 3) % 7) - 3);
  if (!bias0.empty()) trainer.set_expert_bias(bias0);
  if (gpt_oss_model) {  // biases and sinks start at zero: drawn instead, so the forward reads them
    std::vector<float> w = trainer.whole_params(0);
    for (const auto& t : g.layout().tensors())
      if (t.kind == nn::ParamKind::Bias)
        for (int64_t i = 0; i < t.size(); ++i)
          w[size_t(t.offset + i)] = 0.1f * nn::counter_normal(nn::mix64(uint64_t(t.offset) + 99), uint64_t(i));
    trainer.set_whole_params(0, w.data());
  }

  nlohmann::json j;
  j["config"] = {{"family", to_string(m.family)}, {"kv_heads", m.kv_heads}, {"rope_theta", m.rope_theta},
                 {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads}, {"ffn_hidden", m.ffn_hidden},
                 {"seq_len", m.seq_len}, {"vocab", m.vocab}, {"micro_batch", B}, {"grad_accum", accum},
                 {"steps", steps}, {"lr", opt.lr}, {"min_lr", opt.min_lr}, {"warmup_steps", opt.warmup_steps},
                 {"decay_steps", opt.decay_steps}, {"weight_decay", opt.weight_decay}, {"grad_clip", opt.grad_clip},
                 {"beta1", opt.beta1}, {"beta2", opt.beta2}, {"eps", opt.eps}, {"experts", m.experts},
                 {"experts_per_token", m.experts_per_token}, {"expert_ffn_hidden", m.expert_ffn_hidden},
                 {"shared_experts", m.shared_experts},
                 {"moe_dense_layers", m.moe_dense_layers}, {"moe_layer_freq", m.moe_layer_freq},
                 {"capacity_factor", m.capacity_factor},
                 {"moe_normalise", o.moe.normalise}, {"moe_drop", o.moe.drop}, {"moe_aux_coeff", o.moe.aux_coeff},
                 {"moe_z_coeff", o.moe.z_coeff}, {"head_dim", m.head_dim()}, {"qk_norm", m.qk_norm},
                 {"norm_eps", m.norm_epsilon()},
                 {"window_size", m.sliding_window}, {"window_attn_skip_freq", m.full_attention_every},
                 {"attention_sinks", m.attention_sinks}, {"mtp_layers", m.mtp_layers},
                 {"mtp_loss_scaling", o.mtp_loss_scaling}};
  if (gpt_oss_model)
    j["config"].update({{"qkv_bias", true}, {"proj_bias", true}, {"mlp_bias", true}, {"router_bias", true},
                        {"swiglu_limit", m.activation_clamp}});
  if (m.is_mla())
    j["config"].update({{"q_lora_rank", m.q_lora_rank}, {"kv_lora_rank", m.kv_lora_rank},
                        {"qk_nope_head_dim", m.qk_nope_head_dim}, {"qk_rope_head_dim", m.qk_rope_head_dim},
                        {"v_head_dim", m.v_head_dim}});
  if (m.router_expert_bias) j["config"].update({{"expert_bias", bias0}, {"bias_update_rate", o.moe.bias_update_rate}});
  if (m.is_moe())
    j["config"].update({{"router_score", m.router_score}, {"router_topk_scaling", m.router_topk_scaling},
                        {"router_groups", m.router_groups}, {"router_group_topk", m.router_group_topk}});
  if (yarn)
    j["config"]["rope_scaling"] = yarn_config;
  else if (!m.rope_scaling.type.empty())
    j["config"]["rope_scaling"] = {{"rope_type", m.rope_scaling.type}, {"factor", m.rope_scaling.factor},
                                   {"low_freq_factor", m.rope_scaling.low_freq_factor},
                                   {"high_freq_factor", m.rope_scaling.high_freq_factor},
                                   {"original_max_position_embeddings", m.rope_scaling.original_max_position}};
  j["device"] = device;
  j["precision"] = precision;
  std::ofstream bin(prefix + ".bin", std::ios::binary);
  int64_t pos = 0;
  auto put = [&](const std::string& name, const void* data, int64_t count, const char* dtype) {
    j["arrays"][name] = {{"offset", pos}, {"count", count}, {"dtype", dtype}};
    bin.write(static_cast<const char*>(data), count * 4);
    pos += count * 4;
  };
  // Device tensors (any dtype) are converted to fp32 on the device, then copied to the host.
  auto put_device = [&](const std::string& name, const kernels::Tensor& t) {
    float* f32 = k->alloc(t.count);
    k->convert(kernels::Tensor(f32, t.count), t);
    std::vector<float> host(t.count);
    k->to_host(host.data(), f32, t.count);
    k->free(f32, t.count);
    put(name, host.data(), int64_t(t.count), "f32");
  };
  for (const auto& t : g.layout().tensors()) {
    // The embedding and head rows past the vocabulary are padding (zero, no gradient): PyTorch has the logical rows.
    const bool vocab_rows = t.name == "wte" || t.name == "head_w";
    j["tensors"].push_back({{"name", t.name}, {"offset", t.offset}, {"rows", vocab_rows ? m.vocab : t.rows}, {"cols", t.cols},
                            {"decay", t.decays()}});
  }
  put_device("params", kernels::Tensor(g.params(), size_t(P)));

  // One batch: logits, loss and gradients (mean over the B*T tokens).
  std::vector<int32_t> tok(N), tgt(N);
  batch(999, 0, tok.data(), tgt.data());
  nn::Activations acts(g);
  g.zero_grads();
  g.forward(acts, tok.data(), tgt.data());
  put("tokens", tok.data(), N, "i32");
  put("targets", tgt.data(), N, "i32");
  // The logical [N, vocab] logits: each row's first m.vocab columns (the rest is vocabulary padding).
  auto put_logits = [&](const std::string& name, const kernels::Tensor& logits) {
    const size_t row = size_t(g.shard().vocab_local());
    float* f32 = k->alloc(size_t(N) * row);
    k->convert(kernels::Tensor(f32, size_t(N) * row), logits.slice(0, size_t(N) * row));
    std::vector<float> all(size_t(N) * row), host;
    k->to_host(all.data(), f32, all.size());
    k->free(f32, all.size());
    for (int64_t i = 0; i < N; ++i) host.insert(host.end(), all.begin() + i * row, all.begin() + i * row + m.vocab);
    put(name, host.data(), int64_t(host.size()), "f32");
  };
  put_logits("logits", acts.logits());
  const float loss = float(g.loss_sum(acts) / double(N));
  put("loss", &loss, 1, "f32");
  for (int64_t d = 1; d <= m.mtp_layers; ++d) {  // each depth's mean over the B (T - d) rows with a label
    put_logits("mtp_logits_" + std::to_string(d), acts.mtp_logits(d));
    const float mtp_loss = float(g.mtp_loss_sum(acts, d) / double(B * (m.seq_len - d)));
    put("mtp_loss_" + std::to_string(d), &mtp_loss, 1, "f32");
  }
  const float aux = float(g.moe_aux_loss(acts));
  put("moe_aux_loss", &aux, 1, "f32");
  int32_t dropped = 0;
  for (int64_t i = 0; i < g.layout().all_layers(); ++i)  // the MTP layers' too
    if (const nn::MoeRouting* r = acts.routing(i)) dropped += int32_t(r->dropped);
  put("moe_dropped", &dropped, 1, "i32");
  g.backward(acts, tok.data(), tgt.data(), 1.0f / float(N));
  put_device("grads", kernels::Tensor(g.grads(), size_t(P)));

  // Ten optimizer steps; batches are regenerated by the same formula in Python.
  std::vector<float> losses;
  std::vector<float> mtp_losses;  // [step][depth]
  for (int64_t s = 0; s < steps; ++s) {
    losses.push_back(float(trainer.step(s)));
    for (double x : trainer.mtp_losses()) mtp_losses.push_back(float(x));
  }
  put("losses", losses.data(), steps, "f32");
  if (m.mtp_layers > 0) put("mtp_losses", mtp_losses.data(), int64_t(mtp_losses.size()), "f32");
  if (m.router_expert_bias) {  // the bias after the steps: each step's rule applied to its load
    std::vector<float> flat;
    for (const auto& b : trainer.expert_bias()) flat.insert(flat.end(), b.begin(), b.end());
    put("expert_bias_final", flat.data(), int64_t(flat.size()), "f32");
  }
  std::vector<int32_t> all_tok, all_tgt;
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t micro = 0; micro < accum; ++micro) {
      batch(s, micro, tok.data(), tgt.data());
      all_tok.insert(all_tok.end(), tok.begin(), tok.end());
      all_tgt.insert(all_tgt.end(), tgt.begin(), tgt.end());
    }
  put("train_tokens", all_tok.data(), int64_t(all_tok.size()), "i32");
  put("train_targets", all_tgt.data(), int64_t(all_tgt.size()), "i32");
  std::ofstream(prefix + ".json") << j.dump(1);
  return 0;
}
