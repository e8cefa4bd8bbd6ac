// Pipeline timeline as SVG: one row per stage (or rank), forward / backward / weight-gradient
// blocks coloured by kind (hue and shade by chunk, alternating by micro-batch) and labelled with
// the micro-batch when they are wide enough; row names are measured so they are never clipped; pipeline messages in red on the row, the DP stream as a
// thin lane under it; idle time (bubbles) hatched grey; a time axis and a legend.
// Works for any Timeline: simulated (sim/sim_timeline.h) or measured by the runtime.
#pragma once

#include <string>

#include "report/timeline.h"

namespace trident {

struct SvgOptions {
  int width_px = 1600;
  int row_height_px = 34;
  // Zoom: draw only [from_s, to_s] of the step (to_s 0 = to the end), so the blocks of an
  // interleaved or long pipeline are wide enough to read and label.
  double from_s = 0;
  double to_s = 0;
};

// The end of row `row`'s n-th compute block (F, B or W): a window [0, that] on the last stage shows
// the pipeline filling with blocks wide enough to label. 0 when the row has fewer blocks.
double compute_window_end(const Timeline& timeline, int64_t row, int n);

std::string pipeline_svg(const Timeline& timeline, const SvgOptions& options = {});
bool write_pipeline_svg(const Timeline& timeline, const std::string& path, std::string& error,
                        const SvgOptions& options = {});

// Tick step for an axis of length `span`: 1, 2 or 5 times a power of ten, about `ticks` ticks.
double nice_tick_step(double span, int ticks);

}  // namespace trident
