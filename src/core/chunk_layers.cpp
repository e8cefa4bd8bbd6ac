#include "core/chunk_layers.h"

#include <algorithm>

namespace trident {

std::vector<int64_t> chunk_layers(int64_t layers, int64_t pp, int64_t v) {
  const int64_t chunks = std::max<int64_t>(pp * v, 1);
  std::vector<int64_t> out(chunks, layers / chunks);
  int64_t rest = layers % chunks;
  // rest < chunks, so chunks 1..rest exist; the last chunk gets one only when rest = chunks - 1.
  for (int64_t c = 1; c <= rest; ++c) out[c] += 1;
  return out;
}

}  // namespace trident
