// Llama's kernels on the CPU: RMSNorm, QK-norm and SwiGLU backward against finite differences, rotary
// embeddings against the closed form and undone by their inverse (which is their backward).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/ops.h"

using namespace trident;
using kernels::Tensor;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
Tensor t(std::vector<float>& v) { return {v.data(), v.size()}; }
double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// d/d(eps) f(x + eps * dir) by central differences vs <grad, dir>.
template <typename F>
void expect_directional(const char* what, F f, std::vector<float>& x, const std::vector<float>& grad, uint32_t seed) {
  auto dir = randn(x.size(), seed);
  const auto saved = x;
  const float eps = 1e-2f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] + eps * dir[i];
  const double fp = f();
  for (size_t i = 0; i < x.size(); ++i) x[i] = saved[i] - eps * dir[i];
  const double fm = f();
  x = saved;
  const double numeric = (fp - fm) / (2.0 * eps), analytic = dot(dir, grad);
  EXPECT_NEAR(analytic, numeric, 2e-2 * std::max(1.0, std::abs(numeric))) << what;
}

struct LlamaKernels : ::testing::Test {
  std::unique_ptr<kernels::Kernels> k = kernels::make_cpu_kernels(2);
};

}  // namespace

TEST_F(LlamaKernels, rmsnorm_normalises_rows_and_its_backward_matches_finite_differences) {
  const int64_t N = 7, C = 48;
  auto x = randn(N * C, 1, 3.0f), w = randn(C, 2), r = randn(N * C, 3);
  std::vector<float> out(N * C), rstd(N);
  auto f = [&] {
    k->rmsnorm_forward(t(out), rstd.data(), t(x), t(w), N, C, 1e-5f);
    return dot(out, r);
  };
  f();
  double ss = 0;
  for (int64_t c = 0; c < C; ++c) ss += double(x[size_t(c)]) * x[size_t(c)];
  EXPECT_NEAR(rstd[0], 1.0 / std::sqrt(ss / C + 1e-5), 1e-5);
  EXPECT_NEAR(out[5], x[5] * rstd[0] * w[5], 1e-5);
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f);
  k->rmsnorm_backward(t(dx), dw.data(), t(r), t(x), t(w), rstd.data(), N, C);
  expect_directional("dx", f, x, dx, 4);
  expect_directional("dw", f, w, dw, 5);
}

// QK-norm: each of 3 heads of 8 at the start of rows of 40 (the rest untouched) normalised on its
// own with eps 1e-6, the input kept; the in-place backward against finite differences.
TEST_F(LlamaKernels, head_rmsnorm_normalises_each_head_in_place_and_its_backward_matches_finite_differences) {
  const int64_t N = 5, heads = 3, hd = 8, row = 5 * hd;
  auto x = randn(N * row, 21, 3.0f), w = randn(hd, 22), r = randn(N * row, 23);
  std::vector<float> y, saved(N * heads * hd), rstd(N * heads);
  auto f = [&] {
    y = x;
    k->head_rmsnorm_forward(t(y), t(saved), rstd.data(), t(w), N, heads, hd, row, 1e-6f);
    return dot(y, r);
  };
  f();
  const int64_t n = 2, h = 1;  // row 2, head 1
  double ss = 0;
  for (int64_t d = 0; d < hd; ++d) ss += double(x[size_t(n * row + h * hd + d)]) * x[size_t(n * row + h * hd + d)];
  EXPECT_NEAR(rstd[size_t(n * heads + h)], 1.0 / std::sqrt(ss / hd + 1e-6), 1e-5);
  EXPECT_NEAR(y[size_t(n * row + h * hd + 3)], x[size_t(n * row + h * hd + 3)] * rstd[size_t(n * heads + h)] * w[3], 1e-5);
  EXPECT_EQ(y[size_t(n * row + heads * hd + 1)], x[size_t(n * row + heads * hd + 1)]);  // past the heads: untouched
  EXPECT_EQ(saved[size_t((n * heads + h) * hd + 3)], x[size_t(n * row + h * hd + 3)]);
  std::vector<float> dx = r, dw(hd, 0.0f);
  k->head_rmsnorm_backward(t(dx), dw.data(), t(saved), t(w), rstd.data(), N, heads, hd, row);
  for (int64_t i = 0; i < N; ++i)  // the gradient past the heads is the output gradient (identity)
    for (int64_t c = heads * hd; c < row; ++c) EXPECT_EQ(dx[size_t(i * row + c)], r[size_t(i * row + c)]);
  expect_directional("dx", f, x, dx, 24);
  expect_directional("dw", f, w, dw, 25);
}

TEST_F(LlamaKernels, swiglu_is_silu_gate_times_up_and_its_backward_matches_finite_differences) {
  const int64_t N = 5, F = 33;
  auto gu = randn(N * 2 * F, 6, 2.0f), r = randn(N * F, 7);
  std::vector<float> out(N * F), dgu(N * 2 * F);
  auto f = [&] {
    k->swiglu_forward(t(out), t(gu), N, F);
    return dot(out, r);
  };
  f();
  const float g = gu[size_t(2 * F + 3)], u = gu[size_t(2 * F + F + 3)];
  EXPECT_NEAR(out[size_t(F + 3)], g / (1 + std::exp(-g)) * u, 1e-5);
  k->swiglu_backward(t(dgu), t(gu), t(r), N, F);
  expect_directional("dgate_up", f, gu, dgu, 8);
}

TEST_F(LlamaKernels, rope_rotates_pairs_by_position_and_its_inverse_undoes_it) {
  const int64_t B = 2, T = 9, heads = 3, hd = 8, row = 5 * hd;  // the heads start each row; 2 more after them
  auto x = randn(B * T * row, 9);
  const auto before = x;
  const float theta = 10000.0f;
  k->rope(t(x), B, T, heads, hd, row, kernels::RopeFreq{theta}, false);
  // Token (b=1, t=4), head 2, pair 1: angle 4 * theta^(-2/8).
  const int64_t base = (1 * T + 4) * row + 2 * hd + 2;
  const double a = 4.0 * std::pow(double(theta), -2.0 / 8.0);
  EXPECT_NEAR(x[size_t(base)], before[size_t(base)] * std::cos(a) - before[size_t(base + 1)] * std::sin(a), 1e-5);
  EXPECT_NEAR(x[size_t(base + 1)], before[size_t(base)] * std::sin(a) + before[size_t(base + 1)] * std::cos(a), 1e-5);
  EXPECT_EQ(x[size_t((1 * T + 4) * row + heads * hd)], before[size_t((1 * T + 4) * row + heads * hd)]);  // past the heads
  EXPECT_EQ(x[0], before[0]);  // position 0: no rotation
  k->rope(t(x), B, T, heads, hd, row, kernels::RopeFreq{theta}, true);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], before[i], 1e-5) << i;
}

// Llama 3.1's frequencies (Hugging Face's _compute_llama3_parameters) on hd 8, theta 10000,
// original context 64, factor 8, low 1, high 4: pair i has f = 10000^(-i/4), wavelength 2 pi / f
// = 6.3, 63, 628, 6283. Pair 0 (< 64/4) keeps f, pairs 2 and 3 (> 64/1) take f / 8, pair 1 sits
// between: (1 - s) f / 8 + s f with s = (64 / 62.8 - 1) / 3.
TEST_F(LlamaKernels, rope_llama3_scaling_rewrites_each_band_of_frequencies) {
  const int64_t B = 1, T = 7, heads = 1, hd = 8, row = hd;
  const kernels::RopeFreq freq{10000.0f, true, 8.0f, 1.0f, 4.0f, 64.0f};
  auto x = randn(B * T * row, 3);
  const auto before = x;
  k->rope(t(x), B, T, heads, hd, row, freq, false);
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double f = std::pow(10000.0, -double(i) / 4.0), w = 2 * pi / f, s = (64.0 / w - 1.0) / 3.0;
    const double want = i == 0 ? f : i == 1 ? (1 - s) * f / 8 + s * f : f / 8;
    const int64_t at = 5 * row + 2 * i;  // position 5
    const double a = 5.0 * want;
    EXPECT_NEAR(x[size_t(at)], before[size_t(at)] * std::cos(a) - before[size_t(at + 1)] * std::sin(a), 1e-5) << i;
    EXPECT_NEAR(x[size_t(at + 1)], before[size_t(at)] * std::sin(a) + before[size_t(at + 1)] * std::cos(a), 1e-5) << i;
  }
}

// Multi-head latent attention's head blocks: strided heads copied, one block broadcast to every
// head, the heads summed into one block (onto what it held), zeros; each element by hand.
TEST_F(LlamaKernels, copy_heads_moves_broadcasts_sums_and_zeroes_blocks_of_heads) {
  const int64_t rows = 3, heads = 4, cols = 2, src_row = 13, src_head = 3, dst_row = 9, dst_head = 2;
  auto src = randn(size_t(rows * src_row), 61), dst = randn(size_t(rows * dst_row), 62);
  const auto before = dst;
  k->copy_heads(t(dst), dst_row, dst_head, t(src), src_row, src_head, rows, heads, cols, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < dst_row; ++i) {
      const int64_t h = i / dst_head, c = i % dst_head;
      const float want = h < heads && c < cols ? src[size_t(r * src_row + h * src_head + c)] : before[size_t(r * dst_row + i)];
      EXPECT_EQ(dst[size_t(r * dst_row + i)], want) << "copy row " << r << " element " << i;
    }
  auto one = randn(size_t(rows * cols), 63);
  k->copy_heads(t(dst), dst_row, dst_head, t(one), cols, 0, rows, heads, cols, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < cols; ++c)
        EXPECT_EQ(dst[size_t(r * dst_row + h * dst_head + c)], one[size_t(r * cols + c)]) << "broadcast";
  const auto held = one;
  k->copy_heads(t(one), cols, 0, t(src), src_row, src_head, rows, heads, cols, true);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      // The kernel's order: what the block held + (the heads' sum) x scale (1 here); summing onto the
      // held value head by head rounds differently (24 ulp on this row's cancellation).
      float heads_sum = 0.0f;
      for (int64_t h = 0; h < heads; ++h) heads_sum += src[size_t(r * src_row + h * src_head + c)];
      const float want = held[size_t(r * cols + c)] + heads_sum;
      EXPECT_FLOAT_EQ(one[size_t(r * cols + c)], want) << "sum row " << r << " column " << c;
    }
  k->copy_heads(t(dst), dst_row, dst_head, Tensor(), 0, 0, rows, heads, 1, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) EXPECT_EQ(dst[size_t(r * dst_row + h * dst_head)], 0.0f) << "zeros";
}
