// Deterministic, random-access batch sampling (see sampler.h).
#include "runtime/data/sampler.h"

#include <algorithm>

#include "core/problems.h"
#include "runtime/nn/init.h"

namespace trident::data {

namespace {
int64_t val_tokens(const TokenFile& f, int64_t seq_len, double fraction) {
  int64_t v = int64_t(double(f.size()) * fraction);
  v = std::max(v, seq_len + 1);
  return std::min(v, f.size() / 2);
}
}  // namespace

Split train_split(const TokenFile& f, int64_t seq_len, double fraction) {
  return {0, f.size() - val_tokens(f, seq_len, fraction)};
}
Split val_split(const TokenFile& f, int64_t seq_len, double fraction) {
  return {f.size() - val_tokens(f, seq_len, fraction), f.size()};
}

BatchSampler::BatchSampler(const TokenFile& file, Split split, int64_t seq_len, uint64_t seed, uint64_t stream)
    : file_(file), split_(split), seq_len_(seq_len), seed_(seed), stream_(stream) {
  if (split.end - split.begin < seq_len + 1) {
    Problems p;
    p.add("token file '" + file.path() + "' has " + std::to_string(split.end - split.begin) +
              " tokens in this split, fewer than one sequence of " + std::to_string(seq_len) + " + 1",
          "use a larger text or a smaller --seq-len", "data-too-small");
    p.throw_if_any();
  }
}

int64_t BatchSampler::sequence_start(int64_t step, int64_t index) const {
  const uint64_t h = nn::mix64(nn::mix64(nn::mix64(seed_ ^ (stream_ * 0x632BE59BD9B4E019ull)) + uint64_t(step)) +
                               uint64_t(index));
  const uint64_t positions = uint64_t(split_.end - split_.begin - seq_len_);  // starts with a target after the last input
  return split_.begin + int64_t(h % positions);
}

void BatchSampler::fill(int64_t step, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = sequence_start(step, first + i);
    file_.read(start, seq_len_, tokens + i * seq_len_);
    file_.read(start + 1, seq_len_, targets + i * seq_len_);
  }
}

}  // namespace trident::data
