#include "core/vocab_padding.h"

#include <algorithm>

namespace trident {

int64_t padded_vocab(int64_t vocab, int64_t tp) {
  const int64_t multiple = kVocabMultiple * std::max<int64_t>(tp, 1);
  if (vocab <= 0) return 0;
  return (vocab / multiple + (vocab % multiple != 0)) * multiple;  // no vocab + multiple - 1 overflow
}

}  // namespace trident
