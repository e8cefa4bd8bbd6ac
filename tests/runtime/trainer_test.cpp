// Trainer: loss falls on a learnable task, gradient accumulation equals one big batch, and a
// checkpoint save/load continues with bit-identical losses.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/trainer.h"
#include "runtime/nn/init.h"

using namespace trident;

namespace {

ModelSpec tiny() {
  ModelSpec m;
  m.layers = 2, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 17;
  return m;
}

// A learnable sequence: next token = (token * 3 + 1) mod 17, random start per sequence.
void batch(int64_t step, int64_t micro, int64_t B, int32_t* tok, int32_t* tgt) {
  for (int64_t b = 0; b < B; ++b) {
    int32_t x = int32_t(nn::mix64(uint64_t(step * 100 + micro * 10 + b)) % 17);
    for (int64_t t = 0; t < 16; ++t) {
      tok[b * 16 + t] = x;
      x = (x * 3 + 1) % 17;
      tgt[b * 16 + t] = x;
    }
  }
}

engine::AdamWConfig config() {
  engine::AdamWConfig c;
  c.lr = 1e-2, c.min_lr = 1e-3, c.warmup_steps = 2, c.decay_steps = 40;
  return c;
}

TEST(Trainer, loss_falls_on_a_learnable_sequence) {
  auto k = kernels::make_cpu_kernels(2);
  engine::Trainer t(*k, tiny(), 4, 1, config());
  t.init(1);
  auto fn = [](int64_t s, int64_t m, int32_t* a, int32_t* b) { batch(s, m, 4, a, b); };
  const double first = t.train_step(fn).loss;
  double last = first;
  for (int i = 0; i < 39; ++i) last = t.train_step(fn).loss;
  EXPECT_GT(first, 2.5);  // about ln 17
  EXPECT_LT(last, 0.5 * first);
}

TEST(Trainer, gradient_accumulation_equals_the_large_batch) {
  auto k = kernels::make_cpu_kernels(2);
  engine::Trainer big(*k, tiny(), 4, 1, config()), acc(*k, tiny(), 2, 2, config());
  big.init(5);
  acc.init(5);
  auto fb = [](int64_t s, int64_t, int32_t* a, int32_t* b) { batch(s, 0, 4, a, b); };
  auto fa = [](int64_t s, int64_t m, int32_t* a, int32_t* b) {
    int32_t ta[64], tb[64];
    batch(s, 0, 4, ta, tb);
    std::copy(ta + m * 32, ta + m * 32 + 32, a);
    std::copy(tb + m * 32, tb + m * 32 + 32, b);
  };
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(big.train_step(fb).loss, acc.train_step(fa).loss, 1e-5);
}

TEST(Trainer, resume_from_checkpoint_gives_bit_identical_losses) {
  auto k = kernels::make_cpu_kernels(2);
  auto fn = [](int64_t s, int64_t m, int32_t* a, int32_t* b) { batch(s, m, 4, a, b); };
  engine::Trainer straight(*k, tiny(), 4, 1, config());
  straight.init(9);
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) want.push_back(straight.train_step(fn).loss);

  engine::Trainer first(*k, tiny(), 4, 1, config());
  first.init(9);
  for (int i = 0; i < 4; ++i) first.train_step(fn);
  const auto n = size_t(first.model().layout().total());
  checkpoint::Checkpoint c;
  c.meta = {{"param_count", n}, {"step", first.step()}};
  c.params.assign(first.model().params(), first.model().params() + n);
  c.m.assign(first.m(), first.m() + n);
  c.v.assign(first.v(), first.v() + n);
  const auto path = (std::filesystem::temp_directory_path() / "trident_rt_resume.ckpt").string();
  checkpoint::save(path, c);

  const auto d = checkpoint::load(path);
  engine::Trainer resumed(*k, tiny(), 4, 1, config());
  std::copy(d.params.begin(), d.params.end(), resumed.model().params());
  std::copy(d.m.begin(), d.m.end(), resumed.m());
  std::copy(d.v.begin(), d.v.end(), resumed.v());
  resumed.set_step(d.meta["step"].get<int64_t>());
  for (int i = 4; i < 8; ++i) EXPECT_EQ(resumed.train_step(fn).loss, want[size_t(i)]) << "step " << i;
  std::filesystem::remove(path);
}

}  // namespace
