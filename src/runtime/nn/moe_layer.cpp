// The mixture-of-experts MLP of a GptStage layer (see gpt.h, moe_routing.h): router logits on
// the device, the routing on the host, the assignments gathered into expert order, each
// expert's MLP (the family's: GELU for GPT, SwiGLU for Llama) on its rows, and the outputs
// summed back per token with their combine weights. Backward is the same path reversed; the
// router's gradient comes from the combine weights' gradients (a dot of the token's output
// gradient with the expert's output) and the auxiliary losses.
#include <cstring>

#include "runtime/nn/gpt.h"

namespace trident::nn {

namespace {
// Host int32 -> device int32 stored in fp32 slots (from_host copies bits).
void upload(kernels::Kernels& k, int32_t* dst, const std::vector<int32_t>& src) {
  if (!src.empty()) k.from_host(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src.data()), src.size());
}
}  // namespace

void GptStage::moe_expert_forward(const MoeActs& m, const LayerParams& p, int64_t e) {
  const Shard& s = shard();
  const MoeRouting& r = *m.route;
  const int64_t C = s.C(), F = s.expert_ffn(), Fin = s.llama() ? 2 * F : F;
  const int64_t first = r.offset[size_t(e)], n = r.offset[size_t(e + 1)] - first;
  if (n == 0) return;
  const Tensor xs = m.xs.slice(size_t(first * C), size_t(n * C)), ys = m.ys.slice(size_t(first * C), size_t(n * C));
  const Tensor hpre = m.hpre.slice(size_t(first * Fin), size_t(n * Fin)), h = m.h.slice(size_t(first * F), size_t(n * F));
  k_.linear_forward(hpre, xs, W(p.fc_w + e * Fin * C, Fin * C), s.llama() ? Tensor() : W(p.fc_b + e * F, F), n, C, Fin);
  if (s.llama()) k_.swiglu_forward(h, hpre, n, F);
  else k_.gelu_forward(h, hpre);
  k_.linear_forward(ys, h, W(p.fc_proj_w + e * C * F, C * F), s.llama() ? Tensor() : W(p.fc_proj_b + e * C, C), n, F, C);
}

void GptStage::moe_forward(const MoeActs& m, const LayerParams& p, const Tensor& inp, const Tensor& out) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), E = s.model.experts, k = s.model.experts_per_token;
  const Tensor logits = moe_logits_.slice(0, size_t(N * E));
  k_.linear_forward(logits, inp, W(p.router_w, E * C), Tensor(), N, C, E);
  k_.convert(Tensor(moe_f32_, size_t(N * E)), logits);
  std::vector<float> host(size_t(N * E));
  k_.to_host(host.data(), moe_f32_, host.size());
  MoeRouting& r = *m.route;
  r = route_tokens(host.data(), N, E, k, s.moe);
  upload(k_, m.rows, r.token);
  upload(k_, m.pos, r.pos);
  k_.from_host(m.weight, r.weight.data(), r.weight.size());
  if (r.rows() > 0) k_.from_host(m.row_weight, r.row_weight.data(), r.row_weight.size());
  k_.gather_rows(m.xs, inp, m.rows, nullptr, r.rows(), C);
  for (int64_t e = 0; e < E; ++e) moe_expert_forward(m, p, e);
  k_.combine_rows(out, m.ys, m.pos, m.weight, N, k, C);
}

// dys rows of expert e (in moe_dys_) -> the expert's weight gradients and its rows of moe_dxs_.
void GptStage::moe_expert_backward(const MoeActs& m, const LayerParams& p, int64_t e) {
  const Shard& s = shard();
  const MoeRouting& r = *m.route;
  const int64_t C = s.C(), F = s.expert_ffn(), Fin = s.llama() ? 2 * F : F;
  const int64_t first = r.offset[size_t(e)], n = r.offset[size_t(e + 1)] - first;
  if (n == 0) return;
  auto rows = [&](const Tensor& t, int64_t width) { return t.slice(size_t(first * width), size_t(n * width)); };
  const Tensor dh = rows(moe_dh_, F), dhpre = s.llama() ? rows(moe_dhpre_, Fin) : dh;
  k_.linear_backward(dh, grad_at(p.fc_proj_w + e * C * F), s.llama() ? nullptr : grad_at(p.fc_proj_b + e * C),
                     rows(moe_dys_, C), rows(m.h, F), W(p.fc_proj_w + e * C * F, C * F), n, F, C);
  if (s.llama()) k_.swiglu_backward(dhpre, rows(m.hpre, Fin), dh, n, F);
  else k_.gelu_backward(dhpre, rows(m.hpre, Fin), dh);
  k_.linear_backward(rows(moe_dxs_, C), grad_at(p.fc_w + e * Fin * C), s.llama() ? nullptr : grad_at(p.fc_b + e * F),
                     dhpre, rows(m.xs, C), W(p.fc_w + e * Fin * C, Fin * C), n, C, Fin);
}

void GptStage::moe_backward(const MoeActs& m, const LayerParams& p, const Tensor& inp, const Tensor& dout,
                            const Tensor& dinp) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), E = s.model.experts, k = s.model.experts_per_token;
  const MoeRouting& r = *m.route;
  const int64_t M = r.rows();
  // Expert outputs' gradients (the combine weight times the token's) and the weights' gradients.
  k_.gather_rows(moe_dys_, dout, m.rows, m.row_weight, M, C);
  k_.gather_row_dots(moe_dots_, dout, m.rows, m.ys, M, C);
  for (int64_t e = 0; e < E; ++e) moe_expert_backward(m, p, e);
  k_.combine_rows(dinp.slice(0, size_t(N * C)), moe_dxs_, m.pos, nullptr, N, k, C);
  // Router: the combine weights' gradients by assignment (0 when dropped), then the logits'.
  std::vector<float> dots(static_cast<size_t>(M)), dweight(static_cast<size_t>(N * k), 0.0f),
      dlogits(static_cast<size_t>(N * E));
  if (M > 0) k_.to_host(dots.data(), moe_dots_, size_t(M));
  for (int64_t i = 0; i < M; ++i) dweight[size_t(r.slot[size_t(i)])] = dots[size_t(i)];
  route_backward(r, dweight.data(), moe_aux_weight_, s.moe, dlogits.data());
  k_.from_host(moe_f32_, dlogits.data(), dlogits.size());
  const Tensor dlog = moe_logits_.slice(0, size_t(N * E));
  k_.convert(dlog, Tensor(moe_f32_, size_t(N * E)));
  const Tensor dx = moe_dx_.slice(0, size_t(N * C));
  k_.linear_backward(dx, grad_at(p.router_w), nullptr, dlog, inp, W(p.router_w, E * C), N, C, E);
  k_.add_inplace(dinp.slice(0, size_t(N * C)), dx);
}

}  // namespace trident::nn
