// Timeline: a plain list of timed blocks on rows, the common input of the Chrome-trace and SVG
// writers. The simulator fills it from its spans (report/sim_timeline.h); the runtime can fill it
// from a measured step, so prediction and measurement are drawn the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident {

struct TimelineBlock {
  int64_t row = 0;         // index into Timeline::rows (one row per pipeline stage, or per rank)
  int lane = 0;            // 0: the row's main stream (compute, blocking comm); 1: a side stream (DP buckets)
  std::string kind;        // "F", "B", "W", "send", "recv", "dp", "emb", "opt", "gather", ... picks the colour
  std::string label;       // short text drawn inside the block when it fits ("12" = micro-batch 12)
  double start_s = 0;
  double end_s = 0;
  int32_t micro_batch = -1;
  int32_t chunk = -1;
};

struct Timeline {
  std::string title;
  std::string subtitle;            // one line of numbers under the title
  std::vector<std::string> rows;   // row names ("stage 0  ranks 0-7")
  std::vector<TimelineBlock> blocks;
  double end_s() const;
};

}  // namespace trident
