// Mixture-of-experts routing on the host (see moe_routing.h).
#include "runtime/nn/moe_routing.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <cmath>
#include <numeric>

namespace trident::nn {

namespace {
// Softmax scores and log-sum-exp of one token's logits (double sums: the order is fixed).
void softmax_row(const float* x, int64_t E, float* p, float* lse) {
  const float m = *std::max_element(x, x + E);
  double s = 0;
  for (int64_t e = 0; e < E; ++e) s += std::exp(double(x[e] - m));
  for (int64_t e = 0; e < E; ++e) p[e] = float(std::exp(double(x[e] - m)) / s);
  *lse = float(double(m) + std::log(s));
}
// Sigmoid scores of one token's logits, and their log-sum-exp (the z-loss's, on the logits alike).
void sigmoid_row(const float* x, int64_t E, float* p, float* lse) {
  const float m = *std::max_element(x, x + E);
  double s = 0;
  for (int64_t e = 0; e < E; ++e) s += std::exp(double(x[e] - m)), p[e] = float(1.0 / (1.0 + std::exp(-double(x[e]))));
  *lse = float(double(m) + std::log(s));
}
// Whether the chosen scores are divided by their sum: normalise, but a single sigmoid score stays
// itself (Megatron-Core and DeepSeek-V3 normalise sigmoid scores at top-k > 1 only).
bool normalised(const MoeOptions& o, int64_t k) { return o.normalise && !(o.sigmoid && k == 1); }
// Each token's sum of its sigmoid scores (the load-balancing loss's P_e is over those sums).
double row_sum(const float* p, int64_t E) {
  double s = 0;
  for (int64_t e = 0; e < E; ++e) s += p[e];
  return s;
}
}  // namespace

// Group-limited routing: the selection scores of the experts outside the token's best group_topk
// groups become -inf (Megatron-Core's masked_fill), a group's score being the sum of its top
// k / group_topk selection scores; ties go to the lower group, as the experts' stable order.
void limit_to_groups(std::vector<float>& sel, int64_t groups, int64_t group_topk, int64_t k) {
  const int64_t E = int64_t(sel.size()), per = E / groups, top = std::max<int64_t>(1, k / group_topk);
  std::vector<double> score(static_cast<size_t>(groups));
  std::vector<float> g(static_cast<size_t>(per));
  for (int64_t i = 0; i < groups; ++i) {
    std::copy_n(sel.begin() + i * per, per, g.begin());
    std::partial_sort(g.begin(), g.begin() + top, g.end(), std::greater<float>());
    score[size_t(i)] = 0;
    for (int64_t j = 0; j < top; ++j) score[size_t(i)] += double(g[size_t(j)]);
  }
  std::vector<int32_t> order(static_cast<size_t>(groups));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[size_t(a)] > score[size_t(b)]; });
  for (int64_t j = group_topk; j < groups; ++j)
    std::fill_n(sel.begin() + order[size_t(j)] * per, per, -std::numeric_limits<float>::infinity());
}

MoeRouting route_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o, const float* bias) {
  MoeRouting r = score_tokens(logits, N, E, k, o, bias);
  const int64_t capacity = capacity_of(N, E, k, o);
  place_rows(r, keep_first(r.expert, E, capacity), capacity, o);
  return r;
}

MoeRouting score_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o, const float* bias) {
  MoeRouting r;
  r.N = N, r.E = E, r.k = k;
  r.probs.resize(size_t(N * E));
  if (o.sigmoid) r.logits.assign(logits, logits + N * E);
  if (o.expert_bias) r.bias.assign(bias, bias + E);
  std::vector<float> sel(static_cast<size_t>(E));
  r.lse.resize(size_t(N));
  r.expert.resize(size_t(N * k));
  r.weight.resize(size_t(N * k));
  r.routed.assign(size_t(E), 0);
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < N; ++t) {
    float* p = r.probs.data() + t * E;
    (o.sigmoid ? sigmoid_row : softmax_row)(logits + t * E, E, p, &r.lse[size_t(t)]);
    for (int64_t e = 0; e < E; ++e) sel[size_t(e)] = o.expert_bias ? p[e] + r.bias[size_t(e)] : p[e];
    if (o.groups > 1) limit_to_groups(sel, o.groups, o.group_topk, k);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return sel[size_t(a)] > sel[size_t(b)]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[size_t(j)]];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[size_t(j)];
      r.expert[size_t(t * k + j)] = e;
      r.weight[size_t(t * k + j)] = float((normalised(o, k) ? double(p[e]) / sum : double(p[e])) * o.topk_scaling);
      ++r.routed[size_t(e)];
    }
  }
  return r;
}

int64_t capacity_of(int64_t N, int64_t E, int64_t k, const MoeOptions& o) {
  return o.drop ? int64_t(std::ceil(o.capacity_factor * double(N * k) / double(E))) : N;
}

std::vector<uint8_t> keep_first(const std::vector<int32_t>& expert, int64_t E, int64_t capacity) {
  std::vector<int64_t> kept(size_t(E), 0);
  std::vector<uint8_t> keep(expert.size(), 0);
  for (size_t a = 0; a < expert.size(); ++a)
    if (kept[size_t(expert[a])] < capacity) ++kept[size_t(expert[a])], keep[a] = 1;
  return keep;
}

void place_rows(MoeRouting& r, const std::vector<uint8_t>& keep, int64_t capacity, const MoeOptions& o) {
  const int64_t N = r.N, E = r.E, k = r.k;
  r.capacity = capacity;
  r.dropped = 0;
  r.pos.assign(size_t(N * k), kDropped);
  r.token.clear(), r.slot.clear(), r.row_weight.clear();
  // Expert-order rows: expert by expert, its kept assignments in token order.
  std::vector<std::vector<int32_t>> by_expert(static_cast<size_t>(E));
  for (int64_t a = 0; a < N * k; ++a) {
    if (keep[size_t(a)]) by_expert[size_t(r.expert[size_t(a)])].push_back(int32_t(a));
    else ++r.dropped;
  }
  r.offset.assign(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) {
    r.offset[size_t(e + 1)] = r.offset[size_t(e)] + int64_t(by_expert[size_t(e)].size());
    for (int32_t s : by_expert[size_t(e)]) {
      r.pos[size_t(s)] = int32_t(r.token.size());
      r.token.push_back(int32_t(s / k));
      r.slot.push_back(s);
      r.row_weight.push_back(r.weight[size_t(s)]);
    }
  }
  const std::vector<double> sums = aux_sums(r);
  set_aux_losses(r, r.routed, std::vector<double>(sums.begin(), sums.end() - 1), sums.back(), N, o);
}

void keep_own_rows(MoeRouting& r, const std::vector<uint8_t>& mine) {
  std::vector<int32_t> token, slot;
  std::vector<float> row_weight;
  std::vector<int64_t> offset(size_t(r.E + 1), 0);
  for (int64_t e = 0; e < r.E; ++e) {
    for (int64_t i = r.offset[size_t(e)]; i < r.offset[size_t(e + 1)]; ++i) {
      const int32_t s = r.slot[size_t(i)];
      if (!mine[size_t(r.token[size_t(i)])]) {
        r.pos[size_t(s)] = kOtherRank;
        continue;
      }
      r.pos[size_t(s)] = int32_t(token.size());
      token.push_back(r.token[size_t(i)]), slot.push_back(s), row_weight.push_back(r.row_weight[size_t(i)]);
    }
    offset[size_t(e + 1)] = int64_t(token.size());
  }
  r.token = std::move(token), r.slot = std::move(slot), r.row_weight = std::move(row_weight), r.offset = std::move(offset);
}

std::vector<double> aux_sums(const MoeRouting& r) {
  std::vector<double> out(size_t(r.E + 1), 0.0);
  const bool sigmoid = !r.logits.empty();
  for (int64_t t = 0; t < r.N; ++t) {
    const float* p = r.probs.data() + t * r.E;
    const double S = sigmoid ? row_sum(p, r.E) : 1.0;  // sigmoid scores: each token's over their sum
    for (int64_t e = 0; e < r.E; ++e) out[size_t(e)] += sigmoid ? p[e] / S : p[e];
  }
  for (int64_t t = 0; t < r.N; ++t) out[size_t(r.E)] += double(r.lse[size_t(t)]) * r.lse[size_t(t)];
  return out;
}

void set_aux_losses(MoeRouting& r, const std::vector<int64_t>& routed, const std::vector<double>& score_sums,
                    double lse_squares, int64_t N, const MoeOptions& o) {
  double aux = 0;
  for (int64_t e = 0; e < r.E; ++e) aux += (score_sums[size_t(e)] / double(N)) * (double(routed[size_t(e)]) / double(N));
  r.aux_loss = o.aux_coeff * double(r.E) / double(r.k) * aux;
  r.z_loss = o.z_coeff * lse_squares / double(N);
  r.N_all = N;
  r.routed_all = routed;
}

void route_backward(const MoeRouting& r, const float* dweight, double aux_weight, const MoeOptions& o, float* dlogits) {
  const int64_t N = r.N, E = r.E, k = r.k;
  std::vector<double> ds(static_cast<size_t>(E));
  // d(aux)/d(score[t, e]) is the same for every token: coeff E / k x f_e / N.
  std::vector<double> daux(static_cast<size_t>(E));
  const double Na = double(r.N_all);
  for (int64_t e = 0; e < E; ++e)
    daux[size_t(e)] = aux_weight * o.aux_coeff * double(E) / double(k) * double(r.routed_all[size_t(e)]) / Na / Na;
  const double dz = aux_weight * o.z_coeff * 2.0 / Na;
  const bool sigmoid = !r.logits.empty();
  const double c = o.topk_scaling;
  for (int64_t t = 0; t < N; ++t) {
    const float* p = r.probs.data() + t * E;
    if (sigmoid) {
      // P_e's term is over q_e = s_e / S_t: ds_e = (daux_e - sum_e' daux_e' q_e') / S_t.
      const double S = row_sum(p, E);
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += daux[size_t(e)] * p[e] / S;
      for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = (daux[size_t(e)] - dot) / S;
    } else {
      for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = daux[size_t(e)];
    }
    const float* dw = dweight + t * k;
    const float* w = r.weight.data() + t * k;
    const int32_t* ex = r.expert.data() + t * k;
    if (normalised(o, k)) {
      // w_j = c s_j / S: ds_j = (c dw_j - sum_i dw_i w_i) / S.
      double S = 0, dot = 0;
      for (int64_t j = 0; j < k; ++j) S += p[ex[j]], dot += double(dw[j]) * w[j];
      for (int64_t j = 0; j < k; ++j) ds[size_t(ex[j])] += (c * double(dw[j]) - dot) / S;
    } else {
      for (int64_t j = 0; j < k; ++j) ds[size_t(ex[j])] += c * double(dw[j]);
    }
    const double zt = dz * double(r.lse[size_t(t)]);
    if (sigmoid) {
      // ds/dx = s (1 - s); the z-loss's gradient is over the softmax of the logits.
      const float* x = r.logits.data() + t * E;
      for (int64_t e = 0; e < E; ++e)
        dlogits[t * E + e] = float(double(p[e]) * (1.0 - double(p[e])) * ds[size_t(e)] +
                                   zt * std::exp(double(x[e]) - double(r.lse[size_t(t)])));
      continue;
    }
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += double(p[e]) * ds[size_t(e)];
    for (int64_t e = 0; e < E; ++e) dlogits[t * E + e] = float(double(p[e]) * (ds[size_t(e)] - sum) + zt * p[e]);
  }
}

void update_expert_bias(float* bias, const std::vector<int64_t>& load, double rate) {
  const int64_t E = int64_t(load.size());
  int64_t total = 0;
  for (int64_t n : load) total += n;
  // sign(mean - load_e) without rounding: compare total with E x load_e (exact integers); the
  // bias in fp32, as Megatron-Core keeps it.
  for (int64_t e = 0; e < E; ++e) {
    const int64_t diff = total - E * load[size_t(e)];
    bias[e] += float(rate) * float((diff > 0) - (diff < 0));
  }
}

}  // namespace trident::nn
