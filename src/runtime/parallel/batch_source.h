// Where a step's sequences come from. Sequence i of the global batch of step s is a pure
// function of (seed, s, i), so a data-parallel replica fetches its share [r*B/d, (r+1)*B/d)
// directly and every layout with the same global batch trains on the same tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/data/token_file.h"
#include "runtime/nn/context_split.h"

namespace trident::parallel {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // tokens/targets: [count * T] host memory, sequences [first, first + count) of step's batch.
  virtual void fill(int64_t step, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const = 0;
  virtual std::string describe() const = 0;
};

// A token file written by `trident data prepare` (the engine's BatchSampler over its training
// split). The file is opened (and verified) once and shared with the validation source.
std::unique_ptr<BatchSource> token_file_source(std::shared_ptr<const data::TokenFile> file, int64_t seq_len,
                                               uint64_t seed);
std::unique_ptr<BatchSource> token_file_source(const std::string& path, int64_t seq_len, uint64_t seed);  // opens it

// The same file's validation split (the sampler's second stream), for the validation loss.
std::unique_ptr<BatchSource> token_file_validation_source(std::shared_ptr<const data::TokenFile> file,
                                                          int64_t seq_len, uint64_t seed);

// Deterministic synthetic text with structure to learn: each sequence counts up from a random
// start with a random stride (mod vocab), so the loss falls within a few steps.
std::unique_ptr<BatchSource> synthetic_source(int64_t vocab, int64_t seq_len, uint64_t seed);

// Context parallel: of `count` whole sequences (split.T tokens each, `whole`), the rows cp rank
// split.rank holds -- its chunks r and 2cp-1-r, in that order -- into out [count * T / cp].
void context_share(const nn::ContextSplit& split, int64_t count, const int32_t* whole, int32_t* out);

}  // namespace trident::parallel
