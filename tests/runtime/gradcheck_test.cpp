// Each kernel's backward against central finite differences of its forward, along random
// directions (the objective is sum(out * R) for a fixed random R).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"

using namespace trident;
using kernels::Kernels;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

double dot(const std::vector<float>& a, const float* b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Checks d/dt f(x + t*dir) at t=0 (central differences) against dot(grad, dir).
void expect_directional(const char* what, const std::function<double()>& f, std::vector<float>& x,
                        const std::vector<float>& grad, float eps, double rtol, uint32_t seed) {
  const auto dir = randn(x.size(), seed);
  const auto saved = x;
  for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] + eps * dir[i];
  const double fp = f();
  for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] - eps * dir[i];
  const double fm = f();
  x = saved;
  const double numeric = (fp - fm) / (2.0 * eps), analytic = dot(dir, grad.data());
  EXPECT_NEAR(analytic, numeric, rtol * std::max(1.0, std::abs(numeric))) << what;
}

// A Tensor view of a host vector (the CPU kernels' memory).
kernels::Tensor t(std::vector<float>& v) { return {v.data(), v.size()}; }

double weighted_sum(const std::vector<float>& out, const std::vector<float>& r) { return dot(r, out.data()); }

struct GradcheckTest : ::testing::Test {
  std::unique_ptr<Kernels> k = kernels::make_cpu_kernels(2);
};

TEST_F(GradcheckTest, layernorm_backward_matches_finite_differences) {
  const int64_t N = 6, C = 40;
  auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), r = randn(N * C, 4);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto f = [&] {
    k->layernorm_forward(t(out), mean.data(), rstd.data(), t(x), t(w), t(b), N, C, 1e-5f);
    return weighted_sum(out, r);
  };
  f();
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  k->layernorm_backward(t(dx), dw.data(), db.data(), t(r), t(x), t(w), mean.data(), rstd.data(), N, C);
  expect_directional("dx", f, x, dx, 1e-2f, 2e-2, 10);
  expect_directional("dw", f, w, dw, 1e-2f, 2e-2, 11);
  expect_directional("db", f, b, db, 1e-2f, 2e-2, 12);
}

TEST_F(GradcheckTest, gelu_backward_matches_finite_differences) {
  const size_t n = 257;
  auto x = randn(n, 5, 2.0f), r = randn(n, 6);
  std::vector<float> out(n), dx(n);
  auto f = [&] {
    k->gelu_forward(t(out), t(x));
    return weighted_sum(out, r);
  };
  k->gelu_backward(t(dx), t(x), t(r));
  expect_directional("dx", f, x, dx, 1e-2f, 1e-2, 13);
}

TEST_F(GradcheckTest, linear_backward_matches_finite_differences) {
  const int64_t N = 33, IC = 20, OC = 17;
  auto x = randn(N * IC, 7), w = randn(OC * IC, 8), b = randn(OC, 9), r = randn(N * OC, 10);
  std::vector<float> out(N * OC);
  auto f = [&] {
    k->linear_forward(t(out), t(x), t(w), t(b), N, IC, OC);
    return weighted_sum(out, r);
  };
  std::vector<float> dx(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
  k->linear_backward(t(dx), dw.data(), db.data(), t(r), t(x), t(w), N, IC, OC);
  expect_directional("dx", f, x, dx, 1e-2f, 1e-3, 14);
  expect_directional("dw", f, w, dw, 1e-2f, 1e-3, 15);
  expect_directional("db", f, b, db, 1e-2f, 1e-3, 16);
}

TEST_F(GradcheckTest, causal_attention_backward_matches_finite_differences) {
  // T = 70 spans a full 64-row block and a partial one.
  const int64_t B = 2, T = 70, nh = 2, hd = 8, C = nh * hd;
  auto qkv = randn(B * T * 3 * C, 17), r = randn(B * T * C, 18);
  std::vector<float> out(B * T * C), probs(k->attention_probs_size(B, T, nh));
  auto f = [&] {
    k->attention_forward(t(out), probs.data(), t(qkv), B, T, nh, hd);
    return weighted_sum(out, r);
  };
  f();
  std::vector<float> dqkv(B * T * 3 * C), scratch(k->attention_scratch_size(B, T, nh));
  k->attention_backward(t(dqkv), scratch.data(), t(r), t(qkv), probs.data(), t(out), B, T, nh, hd);
  expect_directional("dqkv", f, qkv, dqkv, 1e-2f, 2e-2, 19);
}

// GPT-OSS: a window of 20 keys (crossing the 64-row blocks) and a sink per head; the sinks'
// gradient too. A query sees no key 20 or more positions before it.
TEST_F(GradcheckTest, sliding_window_attention_with_sinks_backward_matches_finite_differences) {
  const int64_t B = 2, T = 70, nh = 2, hd = 8, C = nh * hd;
  auto qkv = randn(B * T * 3 * C, 27), r = randn(B * T * C, 28), sinks = randn(nh, 29);
  std::vector<float> out(B * T * C), probs(k->attention_probs_size(B, T, nh));
  kernels::AttentionMask mask;
  mask.window = 20, mask.sinks = t(sinks);
  auto f = [&] {
    k->attention_forward(t(out), probs.data(), t(qkv), B, T, nh, hd, mask);
    return weighted_sum(out, r);
  };
  f();
  std::vector<float> dqkv(B * T * 3 * C), scratch(k->attention_scratch_size(B, T, nh)), dsinks(nh, 0.0f);
  k->attention_backward(t(dqkv), scratch.data(), t(r), t(qkv), probs.data(), t(out), B, T, nh, hd, mask,
                        dsinks.data());
  expect_directional("dqkv", f, qkv, dqkv, 1e-2f, 2e-2, 30);
  expect_directional("dsinks", f, sinks, dsinks, 1e-2f, 2e-2, 31);
  f();  // the unperturbed output again
  const std::vector<float> before = out;
  for (int64_t c = 0; c < C; ++c) qkv[size_t((1 * T + 40) * 3 * C + C + c)] += 5.0f;  // key 40 of sequence 1
  f();
  for (int64_t i = 0; i < T; ++i)  // rows 40..59 see key 40; the others do not
    EXPECT_EQ(out[size_t((T + i) * C)] != before[size_t((T + i) * C)], i >= 40 && i < 60) << "query " << i;
}

TEST_F(GradcheckTest, causal_attention_ignores_future_tokens) {
  const int64_t B = 1, T = 100, nh = 2, hd = 8, C = nh * hd;
  auto qkv = randn(B * T * 3 * C, 20);
  std::vector<float> out1(B * T * C), out2(B * T * C), probs(k->attention_probs_size(B, T, nh));
  k->attention_forward(t(out1), probs.data(), t(qkv), B, T, nh, hd);
  for (int64_t i = 80 * 3 * C; i < T * 3 * C; ++i) qkv[size_t(i)] += 5.0f;  // change tokens 80..99
  k->attention_forward(t(out2), probs.data(), t(qkv), B, T, nh, hd);
  for (int64_t i = 0; i < 80 * C; ++i) ASSERT_EQ(out1[size_t(i)], out2[size_t(i)]) << "token " << i / C;
  EXPECT_NE(out1[size_t(90 * C)], out2[size_t(90 * C)]);
}

TEST_F(GradcheckTest, cross_entropy_backward_matches_finite_differences) {
  const int64_t N = 9, V = 31;
  auto logits = randn(N * V, 21, 3.0f);
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[size_t(i)] = int32_t((i * 7) % V);
  std::vector<float> mx(N), se(N), tl(N), losses(N);
  auto f = [&] {
    k->xent_row_max(mx.data(), t(logits), N, V, V);
    k->xent_sumexp_target(se.data(), tl.data(), t(logits), mx.data(), targets.data(), N, V, V, 0);
    k->xent_losses(losses.data(), se.data(), mx.data(), tl.data(), N);
    double s = 0;
    for (float l : losses) s += l;
    return s / double(N);
  };
  f();
  auto grad = logits;
  k->xent_backward_inplace(t(grad), mx.data(), se.data(), targets.data(), 1.0f / float(N), N, V, V, 0);
  expect_directional("dlogits", f, logits, grad, 1e-2f, 1e-2, 22);
}

TEST_F(GradcheckTest, whole_gpt_gradient_matches_finite_differences) {
  ModelSpec m;
  m.layers = 2, m.hidden = 16, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 12, m.vocab = 23;
  nn::GptStage g(*k, nn::Shard::whole(m), {.B = 2, .T = 12});
  g.init_params(3);
  nn::Activations a(g);
  const int64_t N = g.N(), P = g.layout().total();
  std::vector<int32_t> tok(N), tgt(N);
  for (int64_t i = 0; i < N; ++i) tok[size_t(i)] = int32_t((i * 5) % 23), tgt[size_t(i)] = int32_t((i * 3 + 1) % 23);
  // Larger weights than the init so every path carries signal.
  auto params = randn(size_t(P), 23, 0.3f);
  for (const auto& t : g.layout().tensors())
    if (t.kind == nn::ParamKind::Norm && t.name.back() == 'w')
      for (int64_t i = 0; i < t.size(); ++i) params[size_t(t.offset + i)] += 1.0f;
  auto f = [&] {
    std::copy(params.begin(), params.end(), g.params());
    g.forward(a, tok.data(), tgt.data());
    return g.loss_sum(a) / double(N);
  };
  f();
  g.zero_grads();
  g.backward(a, tok.data(), tgt.data(), 1.0f / float(N));
  std::vector<float> grad(g.grads(), g.grads() + P);
  // One direction per tensor, so each layer's backward is checked on its own.
  for (const auto& t : g.layout().tensors()) {
    auto masked = grad;
    std::vector<float> dir_mask(size_t(P), 0.0f);
    for (int64_t i = 0; i < t.size(); ++i) dir_mask[size_t(t.offset + i)] = 1.0f;
    const auto dir = randn(size_t(P), 100 + uint32_t(t.offset));
    std::vector<float> d(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) d[size_t(i)] = dir[size_t(i)] * dir_mask[size_t(i)];
    const auto saved = params;
    // Central differences: 1e-2 left a 4% truncation error on some draws of these 0.3-std weights.
    const float eps = 3e-3f;
    for (int64_t i = 0; i < P; ++i) params[size_t(i)] = saved[size_t(i)] + eps * d[size_t(i)];
    const double fp = f();
    for (int64_t i = 0; i < P; ++i) params[size_t(i)] = saved[size_t(i)] - eps * d[size_t(i)];
    const double fm = f();
    params = saved;
    const double numeric = (fp - fm) / (2 * eps), analytic = dot(d, grad.data());
    EXPECT_NEAR(analytic, numeric, 3e-2 * std::max(1e-2, std::abs(numeric))) << t.name;
  }
}

}  // namespace
