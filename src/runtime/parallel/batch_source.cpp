#include "runtime/parallel/batch_source.h"

#include <algorithm>

#include "runtime/data/sampler.h"
#include "runtime/data/token_file.h"

namespace trident::parallel {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class SyntheticSource final : public BatchSource {
 public:
  SyntheticSource(int64_t vocab, int64_t T, uint64_t seed) : vocab_(vocab), T_(T), seed_(seed) {}
  void fill(int64_t step, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const override {
    for (int64_t s = 0; s < count; ++s) {
      const uint64_t h = mix(seed_ ^ mix(uint64_t(step) * 1000003ull + uint64_t(first + s)));
      const int64_t start = int64_t(h % uint64_t(vocab_));
      const int64_t stride = 1 + int64_t((h >> 32) % 3);
      for (int64_t t = 0; t < T_; ++t) {
        tokens[s * T_ + t] = int32_t((start + t * stride) % vocab_);
        targets[s * T_ + t] = int32_t((start + (t + 1) * stride) % vocab_);
      }
    }
  }
  std::string describe() const override { return "synthetic counting sequences (seed " + std::to_string(seed_) + ")"; }

 private:
  int64_t vocab_, T_;
  uint64_t seed_;
};

class TokenFileSource final : public BatchSource {
 public:
  TokenFileSource(std::shared_ptr<const data::TokenFile> file, int64_t T, uint64_t seed, bool validation)
      : file_(std::move(file)),
        validation_(validation),
        sampler_(*file_, validation ? data::val_split(*file_, T) : data::train_split(*file_, T), T, seed,
                 validation ? 1 : 0) {}
  void fill(int64_t step, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const override {
    sampler_.fill(step, first, count, tokens, targets);
  }
  std::string describe() const override {
    return "token file " + file_->path() + " (" + std::to_string(file_->size()) + " tokens, " +
           (validation_ ? "validation" : "training") + " split)" +
           (file_->version() < 2 ? "; note: a version 1 file, its tokens carry no checksum (run `trident data prepare` "
                                  "again to add one)"
                                : "");
  }

 private:
  std::shared_ptr<const data::TokenFile> file_;  // shared by the training and validation sources
  bool validation_;
  data::BatchSampler sampler_;
};

}  // namespace

std::unique_ptr<BatchSource> token_file_source(std::shared_ptr<const data::TokenFile> file, int64_t seq_len,
                                               uint64_t seed) {
  return std::make_unique<TokenFileSource>(std::move(file), seq_len, seed, false);
}

std::unique_ptr<BatchSource> token_file_source(const std::string& path, int64_t seq_len, uint64_t seed) {
  return token_file_source(std::make_shared<const data::TokenFile>(path), seq_len, seed);
}

std::unique_ptr<BatchSource> token_file_validation_source(std::shared_ptr<const data::TokenFile> file,
                                                          int64_t seq_len, uint64_t seed) {
  return std::make_unique<TokenFileSource>(std::move(file), seq_len, seed, true);
}

void context_share(const nn::ContextSplit& split, int64_t count, const int32_t* whole, int32_t* out) {
  const int64_t c = split.chunk();
  for (int64_t s = 0; s < count; ++s)
    for (int k = 0; k < 2; ++k)
      std::copy_n(whole + s * split.T + split.first_position(k), c, out + s * split.local() + k * c);
}

std::unique_ptr<BatchSource> synthetic_source(int64_t vocab, int64_t seq_len, uint64_t seed) {
  return std::make_unique<SyntheticSource>(vocab, seq_len, seed);
}

}  // namespace trident::parallel
