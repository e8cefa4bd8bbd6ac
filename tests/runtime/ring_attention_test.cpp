// Ring attention on one process: every context-parallel rank's queries run against every rank's
// keys and values block by block (ContextSplit's pairs, in ring order, merged by the online
// softmax), and the result is plain causal attention of the whole sequence, forward and
// backward, for several cp sizes and with grouped-query heads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <random>
#include <vector>

#include "runtime/kernels/ops.h"
#include "runtime/nn/context_split.h"

using namespace trident;
using kernels::Tensor;

namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
Tensor t(std::vector<float>& v) { return {v.data(), v.size()}; }

struct Case {
  int64_t cp, nh, nkv, chunk;
  int64_t pieces = 1;  // each pair cut into this many runs of query rows (query_pieces), as the ring does
  // GPT-OSS: a sliding window (by whole-sequence positions) and sinks, merged after the ring.
  int64_t window = 0;
  bool sinks = false;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << "cp " << c.cp << ", " << c.nh << " heads / " << c.nkv << " kv, " << c.pieces << " pieces, window "
      << c.window << (c.sinks ? ", sinks" : "");
}

class RingAttention : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttention, merged_blocks_equal_causal_attention_of_the_whole_sequence) {
  const Case c = GetParam();
  auto k = kernels::make_cpu_kernels(2);
  const int64_t B = 2, hd = 8, nh = c.nh, nkv = c.nkv, g = nh / nkv, A = nh * hd;
  const nn::ContextSplit base{c.cp, 0, 2 * c.cp * c.chunk};
  const int64_t T = base.T, Tl = base.local();
  // The whole sequence's qkv, the kv heads repeated for their query heads (what the stage's
  // attention reads after gqa_expand).
  auto qkv = randn(size_t(B * T * 3 * A), 1);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t part = 1; part < 3; ++part)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t d = 0; d < hd; ++d)
          qkv[size_t(n * 3 * A + part * A + h * hd + d)] = qkv[size_t(n * 3 * A + part * A + (h / g) * g * hd + d)];
  auto dout = randn(size_t(B * T * A), 2);
  std::vector<float> out(size_t(B * T * A)), probs(k->attention_probs_size(B, T, nh));
  std::vector<float> dqkv(size_t(B * T * 3 * A)), scratch(k->attention_scratch_size(B, T, nh));
  auto sinks = randn(size_t(nh), 3);
  std::vector<float> dsinks(size_t(nh), 0.0f), ring_dsinks(size_t(nh), 0.0f);
  kernels::Kernels::AttentionMask mask;
  mask.window = c.window;
  if (c.sinks) mask.sinks = t(sinks);
  k->attention_forward(t(out), probs.data(), t(qkv), B, T, nh, hd, mask);
  k->attention_backward(t(dqkv), scratch.data(), t(dout), t(qkv), probs.data(), t(out), B, T, nh, hd, mask,
                        dsinks.data());

  // Row n of rank r's local tensors is token (b, position) of the whole sequence.
  auto whole_row = [&](int64_t r, int64_t b, int64_t i) {
    const int64_t chunk = i < base.chunk() ? 0 : 1;
    return b * T + base.first_position(int(chunk), r) + i % base.chunk();
  };
  auto local = [&](const std::vector<float>& whole, int64_t r, int64_t row) {
    std::vector<float> v(size_t(B * Tl * row));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tl; ++i)
        for (int64_t e = 0; e < row; ++e) v[size_t((b * Tl + i) * row + e)] = whole[size_t(whole_row(r, b, i) * row + e)];
    return v;
  };
  std::vector<std::vector<float>> qkv_l, kv_l, dkv_l;
  for (int64_t r = 0; r < c.cp; ++r) {
    qkv_l.push_back(local(qkv, r, 3 * A));
    kv_l.emplace_back(size_t(B * Tl * 2 * nkv * hd));
    k->ring_kv_pack(t(kv_l.back()), t(qkv_l.back()), B * Tl, nh, nkv, hd);
    dkv_l.emplace_back(size_t(B * Tl * 2 * nkv * hd), 0.0f);
  }
  std::vector<float> ring_scratch(k->ring_attention_scratch_size(Tl, hd));
  double worst_out = 0, worst_dq = 0, worst_dkv = 0;
  std::vector<int64_t> scores(size_t(c.cp), 0);
  for (int64_t r = 0; r < c.cp; ++r) {
    nn::ContextSplit split = base;
    split.rank = r;
    std::vector<float> o(size_t(B * Tl * A)), lse(size_t(B * nh * Tl)), dq(size_t(B * Tl * 3 * A), 0.0f);
    auto d_o = local(dout, r, A);
    for (int64_t i = 0; i < c.cp; ++i) {  // the ring: rank r - i's keys and values at step i
      const int64_t s = (r - i + c.cp) % c.cp;
      const auto blk = split.block(s, B, nh, nkv, hd, c.window);
      for (const auto& piece : nn::query_pieces(blk, c.pieces))
        k->attention_block_forward(t(o), lse.data(), t(qkv_l[size_t(r)]), t(kv_l[size_t(s)]), piece, i == 0,
                                   ring_scratch.data());
      scores[size_t(r)] += blk.causal ? blk.nq * (blk.nq + 1) / 2 : blk.nq * blk.nk;
    }
    if (c.sinks) {  // once per row, after every block; its gradient from this rank's rows
      k->attention_sink_merge(t(o), lse.data(), t(sinks), B, Tl, nh, hd);
      k->attention_sink_backward(ring_dsinks.data(), t(d_o), t(o), lse.data(), t(sinks), B, Tl, nh, hd);
    }
    for (int64_t i = 0; i < c.cp; ++i) {
      const int64_t s = (r - i + c.cp) % c.cp;
      for (const auto& piece : nn::query_pieces(split.block(s, B, nh, nkv, hd, c.window), c.pieces))
        k->attention_block_backward(t(dq), t(dkv_l[size_t(s)]), t(d_o), t(qkv_l[size_t(r)]), t(kv_l[size_t(s)]), t(o),
                                    lse.data(), piece, ring_scratch.data());
    }
    const auto want_out = local(out, r, A), want_dqkv = local(dqkv, r, 3 * A);
    for (size_t e = 0; e < o.size(); ++e) worst_out = std::max(worst_out, double(std::abs(o[e] - want_out[e])));
    for (int64_t n = 0; n < B * Tl; ++n)
      for (int64_t e = 0; e < A; ++e)
        worst_dq = std::max(worst_dq, double(std::abs(dq[size_t(n * 3 * A + e)] - want_dqkv[size_t(n * 3 * A + e)])));
  }
  // Each rank's keys and values got every rank's gradient: against the whole sequence's, the
  // repeated heads summed per kv head (what gqa_reduce does after ring_kv_unpack).
  for (int64_t s = 0; s < c.cp; ++s) {
    auto want = local(dqkv, s, 3 * A);
    std::vector<float> unpacked(size_t(B * Tl * 3 * A), 0.0f), dq_unused(size_t(B * Tl * A)),
        reduced(size_t(B * Tl * 2 * nkv * hd)), want_q(size_t(B * Tl * A)), want_kv(size_t(B * Tl * 2 * nkv * hd));
    k->ring_kv_unpack(t(unpacked), t(dkv_l[size_t(s)]), B * Tl, nh, nkv, hd);
    k->gqa_reduce(t(dq_unused), t(reduced), t(unpacked), B * Tl, nh, nkv, hd);
    k->gqa_reduce(t(want_q), t(want_kv), t(want), B * Tl, nh, nkv, hd);
    for (size_t e = 0; e < reduced.size(); ++e) worst_dkv = std::max(worst_dkv, double(std::abs(reduced[e] - want_kv[e])));
  }
  double worst_dsink = 0;
  for (int64_t h = 0; h < nh; ++h) worst_dsink = std::max(worst_dsink, double(std::abs(ring_dsinks[size_t(h)] - dsinks[size_t(h)])));
  std::printf("[ ring    ] cp %lld, %lld heads / %lld kv heads, window %lld%s: largest difference out %.1e, dq %.1e, "
              "dkv %.1e, dsinks %.1e\n",
              (long long)c.cp, (long long)nh, (long long)nkv, (long long)c.window, c.sinks ? ", sinks" : "", worst_out,
              worst_dq, worst_dkv, worst_dsink);
  EXPECT_LT(worst_out, 2e-5) << "cp " << c.cp;
  EXPECT_LT(worst_dq, 2e-4) << "cp " << c.cp;
  EXPECT_LT(worst_dkv, 2e-4) << "cp " << c.cp;
  EXPECT_LT(worst_dsink, 2e-4) << "cp " << c.cp;
  if (c.sinks) {
    EXPECT_GT(std::abs(dsinks[0]), 1e-3) << "the sinks' gradient is not zero";
  }
  // Causal load balancing: every rank scores the same number of query-key pairs of a sequence,
  // 1 / cp of the whole causal triangle's T (T + 1) / 2.
  for (int64_t r = 1; r < c.cp; ++r) EXPECT_EQ(scores[size_t(r)], scores[0]) << "rank " << r;
  EXPECT_EQ(scores[0] * c.cp, T * (T + 1) / 2) << "cp " << c.cp;
}

INSTANTIATE_TEST_SUITE_P(ContextParallel, RingAttention,
                         ::testing::Values(Case{1, 4, 4, 40}, Case{2, 4, 4, 40}, Case{3, 4, 2, 24}, Case{4, 4, 2, 40},
                                           Case{4, 2, 1, 8}, Case{2, 4, 2, 100, 3}, Case{3, 2, 1, 72, 4},
                                           // windows of 13 and 50 keys crossing chunks of 8 / 40 rows, sinks
                                           Case{1, 4, 2, 40, 1, 50, true}, Case{2, 4, 2, 40, 1, 50, true},
                                           Case{4, 2, 1, 8, 1, 13, true}, Case{3, 4, 2, 72, 4, 50, false},
                                           Case{2, 4, 4, 40, 1, 0, true}),
                         [](const auto& info) {
                           return "cp" + std::to_string(info.param.cp) + "_heads" + std::to_string(info.param.nh) +
                                  "_kv" + std::to_string(info.param.nkv) + "_pieces" + std::to_string(info.param.pieces) +
                                  "_window" + std::to_string(info.param.window) + (info.param.sinks ? "_sinks" : "");
                         });

TEST(RingAttention, a_block_outside_the_sequence_or_short_of_its_diagonal_is_refused) {
  auto k = kernels::make_cpu_kernels(1);
  std::vector<float> x(1024), lse(64), s(k->ring_attention_scratch_size(8, 4));
  kernels::Kernels::AttentionBlock blk;
  blk.B = 1, blk.T = 8, blk.nh = 1, blk.nkv = 1, blk.hd = 4, blk.q0 = 4, blk.nq = 8, blk.nk = 8;
  EXPECT_THROW(k->attention_block_forward(t(x), lse.data(), t(x), t(x), blk, true, s.data()), std::invalid_argument);
  blk.q0 = 4, blk.nq = 4, blk.k0 = 0, blk.nk = 6, blk.causal = true;  // row 7's keys reach row 7, not 5
  EXPECT_THROW(k->attention_block_forward(t(x), lse.data(), t(x), t(x), blk, true, s.data()), std::invalid_argument);
}

}  // namespace
