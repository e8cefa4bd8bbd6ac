#include "plan/kernel_calls.h"

#include <fmt/format.h>

#include <algorithm>

namespace trident::plan {

std::string KernelPass::describe() const {
  std::string s;
  auto add = [&](int64_t n, const char* one, const char* many) {
    if (n > 0) s += fmt::format("{}{} {}", s.empty() ? "" : " + ", n, n == 1 ? one : many);
  };
  add(gemms, "GEMM", "GEMMs");
  add(attention, "attention", "attention");
  add(elementwise, "elementwise", "elementwise");
  add(collectives, "collective", "collectives");
  add(casts, "FP8 cast", "FP8 casts");
  return s.empty() ? "none" : s;
}

bool recomputes_core_attention(const ExecutionSpec& e) {
  // --recompute-modules naming others leaves the core attention out unless it names core_attn.
  return e.recompute == Recompute::Selective && (!e.recompute_modules.any() || e.recompute_modules.core_attn) &&
         (e.attention == AttentionKind::Unfused || e.recompute_flash_attention);
}

namespace {

// The core attention's forward kernels: one fused kernel, or QK^T, scale-mask-softmax, dropout
// and scores x V; with cp > 1, one per KV block plus the merge of the blocks' softmax statistics.
int64_t attention_forward_kernels(AttentionKind a, int64_t cp) {
  const int64_t per_block = a == AttentionKind::Flash ? 1 : 4;
  return cp > 1 ? cp * (per_block + 1) : per_block;
}

// KV blocks the attention runs as: cp round a ring; all-gathered, two (the local block while the
// gather runs, then the gathered rest).
int64_t attention_blocks(const ExecutionSpec& e, int64_t cp) {
  return cp > 1 && e.recipe.cp_kind == CpKind::AllGather ? 2 : cp;
}

}  // namespace

FusedCasts fused_fp8_casts(const ModelSpec& m, const ExecutionSpec& e) {
  if (!quantized_gemms(e.precision) || !e.recipe.fp8_fused_casts) return {};
  return {true, !m.is_moe(), !m.is_moe()};
}

KernelCalls layer_kernel_calls(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, int64_t cp, int64_t ep) {
  KernelCalls k;
  cp = std::max<int64_t>(cp, 1);
  const bool fp8 = quantized_gemms(e.precision);
  KernelPass& f = k.forward;
  // QKV, projection, MLP-in (SwiGLU's gate and up fused), MLP-out; a MoE layer's MLP is its
  // router and each local expert's two GEMMs (GroupedLinear: one cuBLAS call per expert), and
  // the shared experts' two.
  const int64_t local_experts = m.is_moe() ? std::max<int64_t>(m.experts / std::max<int64_t>(ep, 1), 1) : 0;
  f.gemms = m.is_moe() ? 2 + 1 + 2 * local_experts + (m.shared_experts > 0 ? 2 : 0) : 4;
  const int64_t blocks = attention_blocks(e, cp);
  const bool gather = cp > 1 && e.recipe.cp_kind == CpKind::AllGather;
  f.attention = attention_forward_kernels(e.attention, blocks);
  // Two norms, the activation, two bias-dropout-adds; rotary embedding (Llama); MoE: the
  // router's score function and top-k, the permute and unpermute.
  f.elementwise = 5 + (m.learned_positions() ? 0 : 1) + (m.is_moe() ? 4 : 0);
  // TP: two all-reduces, or with sequence parallel two all-gathers and two reduce-scatters; cp:
  // one send-receive per ring step, or one all-gather of K and V.
  f.collectives = (tp > 1 ? (e.sequence_parallel ? 4 : 2) : 0) + (gather ? 1 : cp - 1);
  // The four GEMM inputs, less those cast inside the norms and the activation (fused_fp8_casts).
  const FusedCasts fused = fused_fp8_casts(m, e);
  f.casts = fp8 ? 4 - int64_t(fused.qkv) - int64_t(fused.fc1) - int64_t(fused.fc2) : 0;

  KernelPass& b = k.backward;
  b.gemms = 2 * f.gemms;  // dgrad and wgrad
  // Fused: the backward kernel and its preprocessing (dO . O); unfused: two GEMMs each for QK^T
  // and scores x V, softmax and dropout backward. Per KV block with cp > 1.
  b.attention = (e.attention == AttentionKind::Flash ? 2 : 6) * blocks;
  b.elementwise = f.elementwise;
  // cp: the KV blocks' gradients travel back too (all-gathered: K and V gathered again, their
  // gradients reduce-scattered).
  b.collectives = f.collectives + (cp > 1 ? (gather ? 1 : cp - 1) : 0);
  b.casts = fp8 ? 4 : 0;  // the output gradients quantised for dgrad and wgrad (cast-transposes of their own)

  if (e.recompute == Recompute::Full) {
    k.recompute = f;
  } else if (recomputes_core_attention(e)) {
    k.recompute.attention = f.attention;
  }

  // By scope, from the same counts. Attention block: QKV and projection, the core attention, the
  // norm, rotary embedding and residual add, half the TP collectives and the cp ones, the QKV and
  // projection input casts.
  const int64_t tp_half = tp > 1 ? (e.sequence_parallel ? 2 : 1) : 0;
  const int64_t cp_forward = gather ? 1 : cp - 1, cp_backward = cp > 1 ? cp_forward : 0;
  const int64_t rope = m.learned_positions() ? 0 : 1;
  ScopedKernels& sf = k.scoped_forward;
  sf.attn = 2 + f.attention + (2 + rope) + tp_half + cp_forward + (fp8 ? 2 - int64_t(fused.qkv) : 0);
  const int64_t mlp_casts = fp8 ? 2 - int64_t(fused.fc1) - int64_t(fused.fc2) : 0;
  k.ep_alltoalls_per_pass = m.is_moe() && ep > 1 ? 2 : 0;
  if (m.is_moe()) {
    sf.moe_router = 1 + 3;   // the router's GEMM; the norm before it, score function, top-k
    sf.moe_preprocess = 1;   // the permute
    // The experts' GEMMs, the shared experts', the activation, the unpermute, the residual add.
    sf.moe_rest = (f.gemms - 2 - 1) + 3 + tp_half + mlp_casts + k.ep_alltoalls_per_pass;
  } else {
    sf.mlp = 2 + 3 + tp_half + mlp_casts;  // FC1, FC2; the norm, activation, residual add
  }
  // Backward: dgrad and wgrad of each GEMM, the attention's backward kernels, the element-wise
  // kernels and collectives again (the cp blocks' gradients too), the output gradients' casts.
  ScopedKernels& sb = k.scoped_backward;
  sb.attn = 2 * 2 + b.attention + (2 + rope) + tp_half + cp_forward + cp_backward + (fp8 ? 2 : 0);
  if (m.is_moe()) {
    sb.moe_router = 2 * 1 + 3;
    sb.moe_preprocess = 1;
    sb.moe_rest = 2 * (f.gemms - 2 - 1) + 3 + tp_half + (fp8 ? 2 : 0) + k.ep_alltoalls_per_pass;
  } else {
    sb.mlp = 2 * 2 + 3 + tp_half + (fp8 ? 2 : 0);
  }
  // Recomputation runs before the backward: the whole forward again, or the core attention.
  if (e.recompute == Recompute::Full) {
    sb.attn += sf.attn, sb.mlp += sf.mlp, sb.moe_router += sf.moe_router;
    sb.moe_preprocess += sf.moe_preprocess, sb.moe_rest += sf.moe_rest;
  } else {
    sb.attn += k.recompute.attention;
  }
  return k;
}

}  // namespace trident::plan
