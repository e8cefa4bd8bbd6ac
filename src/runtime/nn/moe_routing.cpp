// Mixture-of-experts routing on the host (see moe_routing.h).
#include "runtime/nn/moe_routing.h"

#include <algorithm>
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
}  // namespace

MoeRouting route_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o) {
  MoeRouting r = score_tokens(logits, N, E, k, o);
  const int64_t capacity = capacity_of(N, E, k, o);
  place_rows(r, keep_first(r.expert, E, capacity), capacity, o);
  return r;
}

MoeRouting score_tokens(const float* logits, int64_t N, int64_t E, int64_t k, const MoeOptions& o) {
  MoeRouting r;
  r.N = N, r.E = E, r.k = k;
  r.probs.resize(size_t(N * E));
  r.lse.resize(size_t(N));
  r.expert.resize(size_t(N * k));
  r.weight.resize(size_t(N * k));
  r.routed.assign(size_t(E), 0);
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < N; ++t) {
    float* p = r.probs.data() + t * E;
    softmax_row(logits + t * E, E, p, &r.lse[size_t(t)]);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[size_t(j)]];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[size_t(j)];
      r.expert[size_t(t * k + j)] = e;
      r.weight[size_t(t * k + j)] = o.normalise ? float(p[e] / sum) : p[e];
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
  for (int64_t e = 0; e < r.E; ++e)
    for (int64_t t = 0; t < r.N; ++t) out[size_t(e)] += r.probs[size_t(t * r.E + e)];
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
  for (int64_t t = 0; t < N; ++t) {
    const float* p = r.probs.data() + t * E;
    for (int64_t e = 0; e < E; ++e) ds[size_t(e)] = daux[size_t(e)];
    const float* dw = dweight + t * k;
    const float* w = r.weight.data() + t * k;
    const int32_t* ex = r.expert.data() + t * k;
    if (o.normalise) {
      // w_j = s_j / S: ds_j = (dw_j - sum_i dw_i w_i) / S.
      double S = 0, dot = 0;
      for (int64_t j = 0; j < k; ++j) S += p[ex[j]], dot += double(dw[j]) * w[j];
      for (int64_t j = 0; j < k; ++j) ds[size_t(ex[j])] += (double(dw[j]) - dot) / S;
    } else {
      for (int64_t j = 0; j < k; ++j) ds[size_t(ex[j])] += dw[j];
    }
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += double(p[e]) * ds[size_t(e)];
    for (int64_t e = 0; e < E; ++e)
      dlogits[t * E + e] = float(double(p[e]) * (ds[size_t(e)] - sum) + dz * double(r.lse[size_t(t)]) * p[e]);
  }
}

}  // namespace trident::nn
