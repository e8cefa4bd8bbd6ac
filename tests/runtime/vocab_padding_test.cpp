// Vocabulary padding: the runtime allocates the planner's padded vocabulary (one helper), the
// padding rows get no probability and no gradient, and checkpoints keep the logical rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/vocab_padding.h"
#include "plan/cost_model.h"
#include "runtime/checkpoint/logical_tensors.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"

using namespace trident;

namespace {
ModelSpec small(int64_t vocab) {
  ModelSpec m;
  m.layers = 1, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 8, m.vocab = vocab;
  return m;
}
}  // namespace

TEST(VocabPadding, megatron_multiples_of_128_times_tp_in_one_helper) {
  EXPECT_EQ(padded_vocab(50257, 1), 50304);
  EXPECT_EQ(padded_vocab(50257, 2), 50432);
  EXPECT_EQ(padded_vocab(50257, 8), 51200);
  EXPECT_EQ(padded_vocab(256, 2), 256);
  EXPECT_EQ(padded_vocab(1, 4), 512);
  EXPECT_EQ(plan::padded_vocab(50257, 2), padded_vocab(50257, 2));  // the planner's is the same function
}

TEST(VocabPadding, shards_hold_equal_padded_slices_and_know_their_token_rows) {
  nn::Shard s = nn::Shard::whole(small(50257));
  s.tp_size = 2;
  s.tp_rank = 0;
  EXPECT_EQ(s.vocab_local(), 25216);
  EXPECT_EQ(s.vocab_valid(), 25216);
  s.tp_rank = 1;
  EXPECT_EQ(s.vocab_offset(), 25216);
  EXPECT_EQ(s.vocab_valid(), 50257 - 25216);
  nn::Shard t = nn::Shard::whole(small(100));  // padded 256 at tp 2: rank 1's slice is all padding
  t.tp_size = 2, t.tp_rank = 1;
  EXPECT_EQ(t.vocab_valid(), 0);
}

// A whole model with vocab 200 (padded to 256): the loss is the softmax over the 200 tokens only,
// the padding logits get a zero gradient, the padding rows of wte stay zero with a zero gradient.
TEST(VocabPadding, padding_logits_get_no_probability_and_no_gradient) {
  auto k = kernels::make_cpu_kernels(1);
  const ModelSpec m = small(200);
  const int64_t B = 2, T = 8, N = B * T;
  nn::GptStage g(*k, nn::Shard::whole(m), {.B = B, .T = T});
  const int64_t V = g.shard().vocab_local();
  ASSERT_EQ(V, 256);
  g.init_params(3);
  std::vector<int32_t> tok(N), tgt(N);
  for (int64_t i = 0; i < N; ++i) tok[size_t(i)] = int32_t((i * 37) % 200), tgt[size_t(i)] = int32_t((i * 53 + 11) % 200);
  nn::Activations a(g);
  g.zero_grads();
  g.forward(a, tok.data(), tgt.data());
  const double loss = g.loss_sum(a) / double(N);
  const float* logits = kernels::f32_data(a.logits(), "test");
  double logical = 0, unmasked = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float* l = logits + i * V;
    double mx = -1e30, s200 = 0, s256 = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(l[j]));
    for (int64_t j = 0; j < V; ++j) (j < 200 ? s200 : s256) += std::exp(double(l[j]) - mx);
    logical += std::log(s200) + mx - l[tgt[size_t(i)]];
    unmasked += std::log(s200 + s256) + mx - l[tgt[size_t(i)]];
  }
  logical /= double(N), unmasked /= double(N);
  EXPECT_NEAR(loss, logical, 1e-5 * logical);
  EXPECT_GT(std::abs(unmasked - logical), 0.1) << "the test cannot tell masked from unmasked";
  g.backward(a, tok.data(), tgt.data(), 1.0f / float(N));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 200; j < V; ++j) ASSERT_EQ(logits[i * V + j], 0.0f) << "logit gradient " << i << "," << j;
  const nn::ParamLayout& L = g.layout();
  const int64_t C = m.hidden;
  double real_rows = 0;
  for (int64_t r = 0; r < V; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float w = g.params()[L.wte + r * C + c], d = g.grads()[L.wte + r * C + c];
      if (r >= 200) {
        ASSERT_EQ(w, 0.0f) << "padding row " << r;
        ASSERT_EQ(d, 0.0f) << "padding gradient row " << r;
      } else {
        real_rows += std::abs(d);
      }
    }
  EXPECT_GT(real_rows, 0.0);
}

TEST(VocabPadding, checkpoints_keep_the_logical_unpadded_rows) {
  nn::Shard s = nn::Shard::whole(small(200));
  s.tp_size = 2;
  for (int64_t r : {0, 1}) {
    s.tp_rank = r;
    const nn::ParamLayout L(s);
    const checkpoint::LogicalSlice ls = checkpoint::logical_slice(s, *L.find("wte"));
    EXPECT_EQ(ls.rows, 200);
    ASSERT_EQ(ls.blocks.size(), 1u);
    EXPECT_EQ(ls.blocks[0].row, r * 128);
    EXPECT_EQ(ls.blocks[0].rows, r == 0 ? 128 : 72);
  }
  nn::Shard one = nn::Shard::whole(small(200));
  const checkpoint::LogicalSlice whole = checkpoint::logical_slice(one, *nn::ParamLayout(one).find("wte"));
  EXPECT_EQ(whole.rows, 200);
  ASSERT_EQ(whole.blocks.size(), 1u);
  EXPECT_EQ(whole.blocks[0].rows, 200);
  nn::Shard empty = nn::Shard::whole(small(100));
  empty.tp_size = 2, empty.tp_rank = 1;
  EXPECT_TRUE(checkpoint::logical_slice(empty, *nn::ParamLayout(empty).find("wte")).blocks.empty());
}
