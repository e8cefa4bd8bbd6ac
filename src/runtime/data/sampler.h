// Batch sampling: deterministic for a seed, random-access by (step, sequence index).
//
// A split is a token range of a TokenFile ([begin, end): the training part or the validation
// part). Sequence i of the global batch of step s starts at a position drawn by a counter-based
// hash of (seed, split, s, i), so:
//   - the same seed gives the same batches on any machine, with any number of replicas;
//   - a data-parallel replica r of d takes sequences [r*B/d, (r+1)*B/d) of the global batch B
//     by asking for them directly (no communication, no skipping);
//   - a resumed run continues with exactly the batches the uninterrupted run would have used.
// Targets are the inputs shifted by one token.
#pragma once

#include <cstdint>

#include "runtime/data/token_file.h"

namespace trident::data {

struct Split {
  int64_t begin = 0, end = 0;
};

// The last `val_fraction` of the file is validation (at least one sequence + 1 tokens when possible).
Split train_split(const TokenFile& f, int64_t seq_len, double val_fraction = 0.1);
Split val_split(const TokenFile& f, int64_t seq_len, double val_fraction = 0.1);

class BatchSampler {
 public:
  // Throws InputError when the split holds fewer than seq_len + 1 tokens.
  BatchSampler(const TokenFile& file, Split split, int64_t seq_len, uint64_t seed, uint64_t stream = 0);

  // Start of sequence `index` of the global batch of `step`.
  int64_t sequence_start(int64_t step, int64_t index) const;
  // Fills tokens/targets [count * seq_len] (host memory) with sequences [first, first+count) of
  // the global batch of `step`.
  void fill(int64_t step, int64_t first, int64_t count, int32_t* tokens, int32_t* targets) const;
  int64_t seq_len() const { return seq_len_; }

 private:
  const TokenFile& file_;
  Split split_;
  int64_t seq_len_;
  uint64_t seed_, stream_;
};

}  // namespace trident::data
