// Pipeline timeline as SVG: one row per stage (or rank) — under an interleaved schedule too, so a
// row shows what its GPU does: forward / backward / weight-gradient blocks in their palette colours
// (report/palette.h; an interleaved schedule's chunks in lighter shades, labelled "c<chunk>/<micro
// -batch>"), labelled with the micro-batch when they are wide enough; row names are measured so
// they are never clipped; pipeline messages on the row in PP's colour, the DP stream as a thin
// lane under it; idle time (bubbles) hatched grey; a time axis and a legend.
// Works for any Timeline: simulated (report/sim_timeline.h) or measured by the runtime.
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
  std::string id_prefix;  // of the SVG's ids (pattern, clip path): two drawings on one page differ
  // For a page's script (html_page.cpp): the plot is a nested <svg id="{prefix}window"> whose
  // viewBox the script narrows to zoom on time; its texts carry what they need to stay legible
  // (data-w, data-need: a block label shows when its zoomed width reaches data-need), and finer
  // ticks (class "fine") wait hidden for a closer zoom.
  bool zoomable = false;
};

// How many compute blocks of the last stage a window shows, and a timeline needs one beyond
// four times that (interleaved schedules, many micro-batches: blocks too thin to read whole).
constexpr int kZoomBlocks = 12;
// The end of that window on the start of the step, or 0 when the whole step reads well.
double zoom_window_end(const Timeline& timeline);

// The end of row `row`'s n-th compute block (F, B or W): a window [0, that] on the last stage shows
// the pipeline filling with blocks wide enough to label. 0 when the row has fewer blocks.
double compute_window_end(const Timeline& timeline, int64_t row, int n);

std::string pipeline_svg(const Timeline& timeline, const SvgOptions& options = {});
// What --svg writes: the drawing, and below it the window of zoom_window_end when there is one.
std::string pipeline_svg_file(const Timeline& timeline, const SvgOptions& options = {});
bool write_pipeline_svg(const Timeline& timeline, const std::string& path, std::string& error,
                        const SvgOptions& options = {});

// Tick step for an axis of length `span`: 1, 2 or 5 times a power of ten, about `ticks` ticks.
double nice_tick_step(double span, int ticks);

}  // namespace trident
