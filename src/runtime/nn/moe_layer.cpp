// The mixture-of-experts MLP of a GptStage layer (see gpt.h, moe_routing.h): router logits on
// the device, the routing on the host, the assignments gathered into expert order, each
// expert's MLP (the family's: GELU for GPT, SwiGLU for Llama, GPT-OSS's clamped unit; biases
// where the model has them, the router's too) on its rows, and the outputs
// summed back per token with their combine weights. Backward is the same path reversed; the
// router's gradient comes from the combine weights' gradients (a dot of the token's output
// gradient with the expert's output) and the auxiliary losses.
//
// Expert parallelism (Shard::ep_size > 1): the expert-order rows of experts on rank q go to q
// with one all-to-all (variable counts), q runs its experts on what it received, chunk by
// (source rank, local expert), and a second all-to-all brings the outputs back; the backward
// moves the output gradients there and the input gradients back the same way.
//
// Tensor parallelism (tp > 1): the EP group of Megatron-Core's expert grid may mix tp and dp
// ranks (etp 1: experts folded over tp x cp x dp). Every tp rank routes the whole micro-batch
// alike (the router is N x E, small; the drops and auxiliary losses are then one process's), but
// dispatches only its own tokens' assignments (own_tokens), so each expert row is computed once
// in the tp group. The combine weights' gradients are summed over tp before the router's backward.
//
// Expert tensor parallelism (Shard::etp_size > 1, Megatron-Core's expert layers): the etp ranks
// hold column slices of the same experts' FC1 and row slices of FC2. Each all-gathers the rows
// the etp group received (padded to the largest member's), runs its slices on all of them, and
// reduce-scatters the partial outputs back to their receivers (FC2's bias on etp rank 0 only);
// the backward all-gathers the output gradients and reduce-scatters the input gradients.
#include <cstring>

#include "runtime/nn/gpt.h"

namespace trident::nn {

namespace {
// Host int32 -> device int32 stored in fp32 slots (from_host copies bits).
void upload(kernels::Kernels& k, int32_t* dst, const std::vector<int32_t>& src) {
  if (!src.empty()) k.from_host(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src.data()), src.size());
}
}  // namespace

void GptStage::moe_exchange_counts(MoeRouting& r) {
  const Shard& s = shard();
  const int64_t ep = s.ep_size, El = s.experts_local();
  r.send_rows.assign(size_t(ep), 0);
  r.recv_rows.assign(size_t(ep), 0);
  std::vector<int32_t> mine(size_t(ep * El)), theirs(size_t(ep * El));
  for (int64_t e = 0; e < ep * El; ++e) {
    mine[size_t(e)] = int32_t(r.offset[size_t(e + 1)] - r.offset[size_t(e)]);
    r.send_rows[size_t(e / El)] += size_t(mine[size_t(e)]);
  }
  if (ep == 1) {
    theirs = mine;
  } else {
    if (!ep_ || ep_->size() != ep)
      throw std::logic_error("GptStage: expert parallel (ep " + std::to_string(ep) + ") needs its EP group");
    // Through device memory (an NCCL group moves device buffers only).
    const std::vector<size_t> counts(static_cast<size_t>(ep), static_cast<size_t>(El));
    float* send = moe_counts_;
    float* recv = moe_counts_ + ep * El;
    k_.from_host(send, reinterpret_cast<const float*>(mine.data()), mine.size());
    ep_->all_to_all_v(send, counts.data(), recv, counts.data(), comm::DType::I32);
    k_.to_host(reinterpret_cast<float*>(theirs.data()), recv, theirs.size());
  }
  r.recv_expert_rows.assign(theirs.begin(), theirs.end());
  for (int64_t c = 0; c < ep * El; ++c) r.recv_rows[size_t(c / El)] += size_t(theirs[size_t(c)]);
  const int64_t etp = s.etp_size;
  if (etp == 1) return;
  if (!etp_ || etp_->size() != etp)
    throw std::logic_error("GptStage: expert tensor parallel (etp " + std::to_string(etp) + ") needs its ETP group");
  std::vector<int32_t> all(size_t(etp * ep * El));
  float* send = moe_counts_ + 2 * ep * El;
  k_.from_host(send, reinterpret_cast<const float*>(theirs.data()), theirs.size());
  etp_->all_gather(send, send + ep * El, size_t(ep * El), comm::DType::I32);
  k_.to_host(reinterpret_cast<float*>(all.data()), send + ep * El, all.size());
  r.etp_rows.assign(all.begin(), all.end());
  r.etp_stride = 0;
  for (int64_t i = 0; i < etp; ++i) {
    int64_t rows = 0;
    for (int64_t c = 0; c < ep * El; ++c) rows += r.etp_rows[size_t(i * ep * El + c)];
    r.etp_stride = std::max(r.etp_stride, rows);
  }
}

// The etp group's received rows, each member's block etp_stride rows long (the rows past a
// member's own count are left as they are: no chunk reads them), and the partial sums back.
void GptStage::etp_gather(const Tensor& rows, const Tensor& gathered, const MoeRouting& r) {
  etp_->all_gather(rows.data, gathered.data, size_t(r.etp_stride * shard().C()), rows.dtype);
}

void GptStage::etp_reduce(const Tensor& partial, const Tensor& rows, const MoeRouting& r) {
  etp_->reduce_scatter(partial.data, rows.data, size_t(r.etp_stride * shard().C()), partial.dtype,
                       comm::ReduceOp::Sum);
}

void GptStage::moe_move(const Tensor& from, const Tensor& to, const MoeRouting& r, bool back) {
  if (shard().ep_size == 1) return;  // the same buffer
  const size_t C = size_t(shard().C());
  std::vector<size_t> send(back ? r.recv_rows : r.send_rows), recv(back ? r.send_rows : r.recv_rows);
  for (size_t& x : send) x *= C;
  for (size_t& x : recv) x *= C;
  ep_->all_to_all_v(from.data, send.data(), to.data, recv.data(), from.dtype);
}

void GptStage::moe_expert_forward(const MoeActs& m, const LayerParams& p, int64_t e, int64_t first, int64_t n) {
  const Shard& s = shard();
  const int64_t C = s.C(), F = s.expert_ffn_local(), Fin = s.llama() ? 2 * F : F;
  if (n == 0) return;
  const Tensor xs = m.xg.slice(size_t(first * C), size_t(n * C));
  const Tensor ys = expert_out(m).slice(size_t(first * C), size_t(n * C));
  const bool bias = p.fc_proj_b >= 0 && s.etp_rank == 0;  // FC2's bias once in the etp group's sum
  const Tensor hpre = m.hpre.slice(size_t(first * Fin), size_t(n * Fin)), h = m.h.slice(size_t(first * F), size_t(n * F));
  k_.linear_forward(hpre, xs, W(p.fc_w + e * Fin * C, Fin * C), p.fc_b >= 0 ? W(p.fc_b + e * Fin, Fin) : Tensor(), n, C,
                    Fin);
  if (s.llama()) glu_forward(h, hpre, n, F);
  else k_.gelu_forward(h, hpre);
  k_.linear_forward(ys, h, W(p.fc_proj_w + e * C * F, C * F), bias ? W(p.fc_proj_b + e * C, C) : Tensor(), n, F, C);
}

void GptStage::moe_forward(const MoeActs& m, const LayerParams& p, const Tensor& inp, const Tensor& out) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), E = s.model.experts, k = s.model.experts_per_token;
  const Tensor logits = moe_logits_.slice(0, size_t(N * E));
  k_.linear_forward(logits, inp, W(p.router_w, E * C), bias(p.router_b, E), N, C, E);
  k_.convert(Tensor(moe_f32_, size_t(N * E)), logits);
  std::vector<float> host(size_t(N * E));
  k_.to_host(host.data(), moe_f32_, host.size());
  MoeRouting& r = *m.route;
  // The layer's expert bias (its index: p is one of layout_'s layers).
  const size_t layer = size_t(&p - &layout_.layer(0));
  const float* bias = s.moe.expert_bias && layer < moe_bias_.size() ? moe_bias_[layer] : nullptr;
  if (s.moe.expert_bias && !bias) throw std::logic_error("GptStage: a router with an expert bias needs set_expert_bias");
  if (moe_cp_ && s.moe.drop) {
    // The capacity and the first-come order are the whole micro-batch's, as in one process.
    r = score_tokens(host.data(), N, E, k, s.moe, bias);
    const int64_t capacity = capacity_of(N * moe_cp_->size(), E, k, s.moe);
    place_rows(r, moe_cp_keep(r, capacity), capacity, s.moe);
  } else {
    r = route_tokens(host.data(), N, E, k, s.moe, bias);
  }
  if (moe_cp_) moe_whole_batch_aux(r);
  if (s.tp_size > 1) keep_own_rows(r, own_tokens());
  moe_exchange_counts(r);
  upload(k_, m.rows, r.token);
  upload(k_, m.pos, r.pos);
  k_.from_host(m.weight, r.weight.data(), r.weight.size());
  if (r.rows() > 0) k_.from_host(m.row_weight, r.row_weight.data(), r.row_weight.size());
  k_.gather_rows(m.xs, inp, m.rows, nullptr, r.rows(), C);
  moe_move(m.xs, m.xr, r, false);
  if (s.etp_size > 1) etp_gather(m.xr, m.xg, r);
  moe_chunks(r, [&](int64_t e, int64_t first, int64_t n) { moe_expert_forward(m, p, e, first, n); });
  if (s.etp_size > 1) etp_reduce(moe_yg_, m.yr, r);
  moe_move(m.yr, m.ys, r, true);
  k_.combine_rows(out, m.ys, m.pos, m.weight, N, k, C);
}

// Under tp > 1: this tp rank's tokens, its sequence-parallel rows (b, tp_rank T/tp + t) of the
// micro-batch (without sequence parallelism the same slice). Its expert output rows are its
// tokens', zeros elsewhere: the layer's tp reduction puts each token's sum together, exactly.
std::vector<uint8_t> GptStage::own_tokens() const {
  const Shard& s = shard();
  const int64_t N = this->N(), tp = s.tp_size;
  std::vector<uint8_t> mine(static_cast<size_t>(N));
  for (int64_t t = 0; t < N; ++t) mine[size_t(t)] = (t % T_) * tp / T_ == s.tp_rank;
  return mine;
}

// The layer's MLP when it is a MoE layer. The shared experts run first: under sequence
// parallelism inp and out are the same gathered buffer, and the routed combine writes out only
// after its own reads of inp. Their output is a partial sum over tp, like a dense MLP's, added
// to the routed output (this rank's tokens' rows), so the layer's tp reduction counts each once.
void GptStage::moe_mlp_forward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& out) {
  const size_t NC = size_t(N() * shard().C());
  const bool shared = p.shared_fc_w >= 0;
  if (shared) shared_experts_forward(x, p, inp, shared_out_);
  moe_forward(x.moe, p, inp, out);
  if (shared) k_.add_inplace(out.slice(0, NC), shared_out_.slice(0, NC));
}

// Its backward: the shared experts' first, while dout is whole (under sequence parallelism
// moe_backward gathers its router input into dout's buffer); their input gradient, partial over
// tp, is added to the routed one (this rank's tokens' rows, and the router's on the tp lead).
void GptStage::moe_mlp_backward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& dout,
                                const Tensor& dinp) {
  const size_t NC = size_t(N() * shard().C());
  const bool shared = p.shared_fc_w >= 0;
  if (shared) shared_experts_backward(x, p, inp, dout, shared_out_);
  moe_backward(x.moe, p, inp, dout, dinp);
  if (shared) k_.add_inplace(dinp.slice(0, NC), shared_out_.slice(0, NC));
}

// The shared experts: one MLP of this rank's Fs columns (column-parallel in, row-parallel out,
// the output bias on the tp lead only), from the gathered inp into out [N, C].
void GptStage::shared_experts_forward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& out) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), F = s.shared_ffn_local();
  const Tensor y = out.slice(0, size_t(N * C)), h = x.fch_gelu.slice(0, size_t(N * F));
  if (s.llama()) {
    const Tensor gate_up = x.fch.slice(0, size_t(N * 2 * F));
    k_.linear_forward(gate_up, inp, W(p.shared_fc_w, 2 * F * C), Tensor(), N, C, 2 * F);
    glu_forward(h, gate_up, N, F);
    k_.linear_forward(y, h, W(p.shared_proj_w, C * F), Tensor(), N, F, C);
  } else {
    const Tensor pre = x.fch.slice(0, size_t(N * F));
    k_.linear_forward(pre, inp, W(p.shared_fc_w, F * C), W(p.shared_fc_b, F), N, C, F);
    k_.gelu_forward(h, pre);
    k_.linear_forward(y, h, W(p.shared_proj_w, C * F), tp_lead() ? W(p.shared_proj_b, C) : Tensor(), N, F, C);
  }
}

// Its backward from dout [N, C] (whole rows): the weight gradients, and the input gradient into
// dinp [N, C], partial over tp. Its input, the norm's rows (this rank's under sequence
// parallelism), is gathered into moe_dx_, free until moe_backward's router pass. A split
// backward's input pass leaves the weight gradients out and keeps the input projection's output
// gradient in fch (the pre-activation, read by then), as the dense MLP does.
void GptStage::shared_experts_backward(const LayerActs& x, const LayerParams& p, const Tensor& inp, const Tensor& dout,
                                       const Tensor& dinp) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), F = s.shared_ffn_local();
  const Tensor h = x.fch_gelu.slice(0, size_t(N * F)), dx = dinp.slice(0, size_t(N * C));
  Tensor whole = winput(inp);
  if (sp_ && weights_now_) {
    whole = moe_dx_.slice(0, size_t(N * C));
    sp_all_gather(whole, inp);
  }
  if (s.llama()) {
    const Tensor dh = dmlp_.slice(0, size_t(N * F)), dgate_up = dbig_.slice(0, size_t(N * 2 * F));
    k_.linear_backward(dh, wgrad(p.shared_proj_w), nullptr, dout, winput(h), W(p.shared_proj_w, C * F), N, F, C);
    glu_backward(dgate_up, x.fch.slice(0, size_t(N * 2 * F)), dh, N, F);
    keep(x.fch, dgate_up);
    k_.linear_backward(dx, wgrad(p.shared_fc_w), nullptr, dgate_up, whole, W(p.shared_fc_w, 2 * F * C), N, C, 2 * F);
  } else {
    const Tensor dpre = dbig_.slice(0, size_t(N * F));
    k_.linear_backward(dpre, wgrad(p.shared_proj_w), wgrad(p.shared_proj_b), dout, winput(h), W(p.shared_proj_w, C * F),
                       N, F, C);
    k_.gelu_backward(dpre, x.fch.slice(0, size_t(N * F)), dpre);
    keep(x.fch, dpre);
    k_.linear_backward(dx, wgrad(p.shared_fc_w), wgrad(p.shared_fc_b), dpre, whole, W(p.shared_fc_w, F * C), N, C, F);
  }
}

// Context parallelism: each cp rank routes its rows of the micro-batch (the capacity is its
// rows'), but the auxiliary losses, like one process's, count the whole micro-batch: the
// assignments per expert summed (exact integers), the score and log-sum-exp sums in rank order.
void GptStage::moe_whole_batch_aux(MoeRouting& r) {
  const int64_t E = r.E, n = moe_cp_->size();
  std::vector<int64_t> routed = r.routed;
  moe_cp_->all_reduce(routed.data(), routed.size(), comm::DType::I64, comm::ReduceOp::Sum);
  const std::vector<double> mine = aux_sums(r);
  std::vector<double> all(mine.size() * size_t(n));
  moe_cp_->all_gather(mine.data(), all.data(), mine.size() * sizeof(double), comm::DType::U8);
  std::vector<double> sums(size_t(E), 0.0);
  double lse_squares = 0;
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t e = 0; e < E; ++e) sums[size_t(e)] += all[size_t(q * (E + 1) + e)];
    lse_squares += all[size_t(q * (E + 1) + E)];
  }
  set_aux_losses(r, routed, sums, lse_squares, r.N * n, shard().moe);
}

// Context parallelism with dropping: which of this rank's assignments their experts keep when
// the whole micro-batch's assignments compete in one process's token order. The chosen experts
// (N k int32 per rank, small) are all-gathered over cp and put in sequence order: local row j
// of rank q holds position ContextSplit::position(j, q) of its sequence.
std::vector<uint8_t> GptStage::moe_cp_keep(const MoeRouting& r, int64_t capacity) {
  const int64_t n = moe_cp_->size(), k = r.k, T = ctx_.T, local = ctx_.local(), B = r.N / local;
  const size_t mine = size_t(r.N * k);
  std::vector<int32_t> all(mine * size_t(n)), whole(mine * size_t(n));
  moe_cp_->all_gather(r.expert.data(), all.data(), mine, comm::DType::I32);
  auto at = [&](int64_t q, int64_t t) {  // rank q's local token t -> token of the micro-batch
    return (t / local) * T + ctx_.position(t % local, q);
  };
  for (int64_t q = 0; q < n; ++q)
    for (int64_t t = 0; t < B * local; ++t)
      for (int64_t j = 0; j < k; ++j) whole[size_t(at(q, t) * k + j)] = all[size_t(q) * mine + size_t(t * k + j)];
  const std::vector<uint8_t> keep_all = keep_first(whole, r.E, capacity);
  std::vector<uint8_t> keep(mine);
  for (int64_t t = 0; t < B * local; ++t)
    for (int64_t j = 0; j < k; ++j) keep[size_t(t * k + j)] = keep_all[size_t(at(ctx_.rank, t) * k + j)];
  return keep;
}

// Output gradients of rows [first, first + n) of local expert e (expert_dy: moe_dyr_, or the etp
// group's gathered) -> the expert's weight gradients (its slices) and those rows of expert_dx
// (partial over etp). A split backward's input pass leaves the weight gradients out and keeps the
// input projection's output gradients in hpre (read by then).
void GptStage::moe_expert_backward(const MoeActs& m, const LayerParams& p, int64_t e, int64_t first, int64_t n) {
  const Shard& s = shard();
  const int64_t C = s.C(), F = s.expert_ffn_local(), Fin = s.llama() ? 2 * F : F;
  if (n == 0) return;
  auto rows = [&](const Tensor& t, int64_t width) { return t.slice(size_t(first * width), size_t(n * width)); };
  const Tensor dh = rows(moe_dh_, F), dhpre = s.llama() ? rows(moe_dhpre_, Fin) : dh;
  k_.linear_backward(dh, wgrad(p.fc_proj_w + e * C * F), p.fc_proj_b >= 0 ? wgrad(p.fc_proj_b + e * C) : nullptr,
                     rows(expert_dy(), C), winput(rows(m.h, F)), W(p.fc_proj_w + e * C * F, C * F), n, F, C);
  if (s.llama()) glu_backward(dhpre, rows(m.hpre, Fin), dh, n, F);
  else k_.gelu_backward(dhpre, rows(m.hpre, Fin), dh);
  keep(rows(m.hpre, Fin), dhpre);
  k_.linear_backward(rows(expert_dx(), C), wgrad(p.fc_w + e * Fin * C), p.fc_b >= 0 ? wgrad(p.fc_b + e * Fin) : nullptr,
                     dhpre, winput(rows(m.xg, C)), W(p.fc_w + e * Fin * C, Fin * C), n, C, Fin);
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
  moe_move(moe_dys_, moe_dyr_, r, false);
  // A split backward keeps the received rows' output gradients for the weight pass where their
  // outputs were (read by the dots above, the last time).
  int64_t received = 0;
  for (int64_t n : r.recv_expert_rows) received += n;
  keep(m.yr, moe_dyr_.slice(0, size_t(received * C)));
  if (s.etp_size > 1) etp_gather(moe_dyr_, moe_dyg_, r);
  moe_chunks(r, [&](int64_t e, int64_t first, int64_t n) { moe_expert_backward(m, p, e, first, n); });
  if (s.etp_size > 1) etp_reduce(expert_dx(), moe_dxr_, r);
  moe_move(moe_dxr_, moe_dxs_, r, true);
  k_.combine_rows(dinp.slice(0, size_t(N * C)), moe_dxs_, m.pos, nullptr, N, k, C);
  // Router: the combine weights' gradients by assignment (0 when dropped), then the logits'.
  std::vector<float> dots(static_cast<size_t>(M)), dweight(static_cast<size_t>(N * k), 0.0f),
      dlogits(static_cast<size_t>(N * E));
  if (M > 0) k_.to_host(dots.data(), moe_dots_, size_t(M));
  for (int64_t i = 0; i < M; ++i) dweight[size_t(r.slot[size_t(i)])] = dots[size_t(i)];
  if (s.tp_size > 1) {
    // Each tp rank has its tokens' combine-weight gradients (zeros for the others'): summed over
    // tp (exact), every tp rank holds the whole micro-batch's, its router gradient the same.
    float* buf = moe_f32_;  // [N E] >= [N k], through device memory for a device group
    k_.from_host(buf, dweight.data(), dweight.size());
    tp_->all_reduce(buf, dweight.size(), comm::DType::F32, comm::ReduceOp::Sum);
    k_.to_host(dweight.data(), buf, dweight.size());
  }
  route_backward(r, dweight.data(), moe_aux_weight_, s.moe, dlogits.data());
  k_.from_host(moe_f32_, dlogits.data(), dlogits.size());
  const Tensor dlog = moe_logits_.slice(0, size_t(N * E));
  k_.convert(dlog, Tensor(moe_f32_, size_t(N * E)));
  const Tensor dx = moe_dx_.slice(0, size_t(N * C));
  keep(m.dlogits, dlog);
  // Under sequence parallelism inp is this rank's rows: gathered now, into the buffer dout came
  // in (read for the last time above).
  k_.linear_backward(dx, wgrad(p.router_w), bgrad(p.router_b), dlog, winput_rows(inp), W(p.router_w, E * C), N, C, E);
  // The router's input gradient is the same on every tp rank: counted once in the layer's tp
  // reduction (the lead's); the experts' rows are each tp rank's own tokens'.
  if (tp_lead()) k_.add_inplace(dinp.slice(0, size_t(N * C)), dx);
}

// The weight pass of a split backward (ZB-H1): the router's, the routed experts' and the shared
// experts' weight gradients from what moe_mlp_backward's input pass kept: the router logits'
// gradient (m.dlogits), each expert's output gradients (in yr) and its input projection's (in
// hpre), the shared experts' input projection's (in fch) and the layer's output gradient (d_out).
void GptStage::moe_mlp_weights(const LayerActs& x, const LayerParams& p) {
  const Shard& s = shard();
  const int64_t N = this->N(), C = s.C(), E = s.model.experts, F = s.expert_ffn_local(), Fin = s.llama() ? 2 * F : F;
  const MoeActs& m = x.moe;
  const Tensor none;
  if (p.shared_fc_w >= 0) {
    const int64_t Fs = s.shared_ffn_local(), Fs_in = s.llama() ? 2 * Fs : Fs;
    k_.linear_backward(none, grad_at(p.shared_proj_w), s.llama() ? nullptr : grad_at(p.shared_proj_b),
                       gathered(x.d_out), x.fch_gelu.slice(0, size_t(N * Fs)), W(p.shared_proj_w, C * Fs), N, Fs, C);
    k_.linear_backward(none, grad_at(p.shared_fc_w), s.llama() ? nullptr : grad_at(p.shared_fc_b),
                       x.fch.slice(0, size_t(N * Fs_in)), gathered(x.ln2), W(p.shared_fc_w, Fs_in * C), N, C, Fs_in);
  }
  k_.linear_backward(none, grad_at(p.router_w), p.router_b >= 0 ? grad_at(p.router_b) : nullptr,
                     m.dlogits.slice(0, size_t(N * E)), gathered(x.ln2), W(p.router_w, E * C), N, C, E);
  moe_chunks(*m.route, [&](int64_t e, int64_t first, int64_t n) {
    if (n == 0) return;
    auto rows = [&](const Tensor& t, int64_t width) { return t.slice(size_t(first * width), size_t(n * width)); };
    k_.linear_backward(none, grad_at(p.fc_proj_w + e * C * F), p.fc_proj_b >= 0 ? grad_at(p.fc_proj_b + e * C) : nullptr,
                       rows(m.yr, C), rows(m.h, F), W(p.fc_proj_w + e * C * F, C * F), n, F, C);
    k_.linear_backward(none, grad_at(p.fc_w + e * Fin * C), p.fc_b >= 0 ? grad_at(p.fc_b + e * Fin) : nullptr,
                       rows(m.hpre, Fin), rows(m.xr, C), W(p.fc_w + e * Fin * C, Fin * C), n, C, Fin);
  });
}

}  // namespace trident::nn
