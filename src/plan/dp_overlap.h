// Data-parallel traffic hidden behind the backward (gradient reduction) or the forward (weight
// all-gather), one piece per model chunk (Megatron's overlap_grad_reduce / overlap_param_gather
// in the interleaved schedule: each chunk has its own buffer, reduced once that chunk's last
// backward ends, gathered before its first forward).
#pragma once

#include <cstdint>

namespace trident::plan {

// One stage's reduction (or gather) of total_s, in `chunks` equal pieces on one stream. Counted
// back from the end of the stage's last backward (the gather mirrors it from the start of its
// first forward): chunk j (0 = the chunk whose backward ends last) ends its last backward j x
// gap_s earlier, gap_s = group x chunk_window_s, group = the micro-batches the interleaved
// schedule runs per chunk in turn (min(m, pp)); its piece starts in buckets during that backward
// (chunk_window_s = window_s / chunks) and its last bucket waits for the backward's end. With one
// chunk this is max(total - window, last bucket), the whole stage behind one micro-batch.
struct ChunkedDp {
  int64_t chunks = 1, group = 1;
  double piece_s = 0;         // total_s / chunks
  double chunk_window_s = 0;  // one chunk's backward (forward) of one micro-batch
  double gap_s = 0;           // between the ends of two chunks' last backwards
  double exposed_s = 0;       // after the stage's last backward (before its first forward)
};
ChunkedDp chunked_dp(double total_s, double last_bucket_s, int64_t chunks, int64_t group, double window_s);

}  // namespace trident::plan
