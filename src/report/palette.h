// The one palette of every chart Trident draws (the HTML page's bars and legends, the pipeline
// timeline): a colour per term from Paul Tol's "muted" qualitative scheme plus two greys,
// chosen to stay apart under the common colour-vision deficiencies
// (https://personal.sron.nl/~pault/, "muted"). Each chart's terms get different colours; terms
// that never share a chart (a memory part and a step term) may share one.
#pragma once

#include <string>
#include <vector>

namespace trident {

struct TermColour {
  std::string term;  // the key charts use: "compute", "tp", "dp", "weights", "F" (a timeline block kind)
  std::string fill;  // "#332288"
  std::string ink;   // text on it: "#fff" or "#000", whichever contrasts more
};

// The colour of a term. Keys of the rehearsal's share rows name their term ("dp_exposed" is DP's,
// "cp_exchange" CP's, "ep_alltoall" EP's); a term the palette does not know is drawn mid grey.
const TermColour& term_colour(const std::string& term);

// The terms of each chart, for the tests: the step's (planner, simulated, rehearsed), the
// memory parts and the timeline's block kinds. Within each the fills differ.
const std::vector<std::string>& step_terms();
const std::vector<std::string>& memory_terms();
const std::vector<std::string>& timeline_kinds();

// A lighter shade of `fill` for an interleaved schedule's chunk `chunk` of `chunks`: chunk 0 the
// colour itself, the last mixed 60% towards white; with its ink.
TermColour chunk_shade(const TermColour& base, int chunk, int chunks);

}  // namespace trident
