// Vocabulary padding, the way Megatron does it (--make-vocab-size-divisible-by 128, times tp):
// the embedding and the LM head get a whole number of aligned rows per tensor-parallel rank.
// 50257 -> 50304 at tp 1, 50432 at tp 2, 51200 at tp 8. The planner charges memory and time for
// the padded rows and the runtime allocates them, both through this one function; the extra
// rows are no tokens (no probability in the softmax, no gradient) and checkpoints keep the
// logical, unpadded vocabulary.
#pragma once

#include <cstdint>

namespace trident {

constexpr int64_t kVocabMultiple = 128;  // rows per tp rank are a multiple of this

// The smallest multiple of kVocabMultiple x tp that holds `vocab` rows (tp < 1 counts as 1).
int64_t padded_vocab(int64_t vocab, int64_t tp);

}  // namespace trident
