#include "plan/dp_overlap.h"

#include <algorithm>
#include <limits>

namespace trident::plan {

ChunkedDp chunked_dp(double total_s, double last_bucket_s, int64_t chunks, int64_t group, double window_s) {
  ChunkedDp d;
  d.chunks = std::max<int64_t>(chunks, 1);
  d.group = std::max<int64_t>(group, 1);
  if (total_s <= 0) return d;
  const double n = double(d.chunks);
  d.piece_s = total_s / n;
  d.chunk_window_s = std::max(window_s, 0.0) / n;
  d.gap_s = double(d.group) * d.chunk_window_s;
  const double last_bucket = std::min(d.piece_s, std::max(last_bucket_s, 0.0));
  // The pieces queue on one stream: the chunk whose backward ends first goes first.
  double finish = -std::numeric_limits<double>::infinity();
  for (int64_t j = d.chunks - 1; j >= 0; --j) {
    const double end = -double(j) * d.gap_s, start = end - d.chunk_window_s;
    finish = std::max(std::max(finish, start) + d.piece_s, end + last_bucket);
  }
  d.exposed_s = std::max(0.0, finish);
  return d;
}

}  // namespace trident::plan
