#include "plan/recompute_modules.h"

#include <algorithm>

#include "plan/mixture_of_experts.h"

namespace trident::plan {

ModuleRecompute module_recompute(const ModelSpec& m, const ExecutionSpec& e, int64_t tp, double T,
                                 const std::function<double(double, double)>& gemm, double elementwise_s_per_byte,
                                 const ModuleDrop& d) {
  ModuleRecompute r;
  if (e.recompute != Recompute::Selective) return r;
  const RecomputeModules& x = e.recompute_modules;
  const double t = double(std::max<int64_t>(tp, 1)), h = double(m.hidden), f = double(m.ffn_hidden);
  if (x.mla_up_proj && m.is_mla()) {
    const double H = double(m.heads), qr = double(m.q_lora_rank), kvr = double(m.kv_lora_rank);
    const double qk = H * double(m.qk_nope_head_dim + m.qk_rope_head_dim) / t;
    const double kv = H * double(m.qk_nope_head_dim + m.v_head_dim) / t;
    // Without a query latent (q_lora_rank 0) the query comes from h directly, outside the checkpoint.
    if (qr > 0) r.s += gemm(qr, qk), r.flops += 2 * T * qr * qk;
    r.s += gemm(kvr, kv), r.flops += 2 * T * kvr * kv;
  }
  if (x.moe_act) r.s += elementwise_s_per_byte * d.moe_act_written;
  if (x.layernorm) r.s += elementwise_s_per_byte * d.layernorm_written;
  if (x.mlp) {
    const double dense = 1 - moe_layer_share(m), in = double(m.mlp_matrices() - 1) * f / t;
    r.s += dense * gemm(h, in) + elementwise_s_per_byte * d.mlp_act_written;
    r.flops += dense * 2 * T * h * in;
  }
  return r;
}

}  // namespace trident::plan
