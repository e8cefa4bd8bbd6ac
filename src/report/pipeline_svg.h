// Pipeline timeline as SVG: one row per stage (or rank), forward / backward / weight-gradient
// blocks coloured by kind (shade by chunk, alternating by micro-batch) and labelled with the
// micro-batch when they are wide enough; pipeline messages in red on the row, the DP stream as a
// thin lane under it; idle time (bubbles) hatched grey; a time axis and a legend.
// Works for any Timeline: simulated (sim/sim_timeline.h) or measured by the runtime.
#pragma once

#include <string>

#include "report/timeline.h"

namespace trident {

struct SvgOptions {
  int width_px = 1600;
  int row_height_px = 34;
};

std::string pipeline_svg(const Timeline& timeline, const SvgOptions& options = {});
bool write_pipeline_svg(const Timeline& timeline, const std::string& path, std::string& error,
                        const SvgOptions& options = {});

// Tick step for an axis of length `span`: 1, 2 or 5 times a power of ten, about `ticks` ticks.
double nice_tick_step(double span, int ticks);

}  // namespace trident
