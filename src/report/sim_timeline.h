// The simulated step as a Timeline for the Chrome-trace and SVG writers.
#pragma once

#include <string>
#include <vector>

#include "report/timeline.h"
#include "sim/simulator.h"

namespace trident {

// row_names: one per stage (e.g. "stage 0  ranks 0-7"); defaults to "stage i".
Timeline to_timeline(const sim::SimResult& result, const std::string& title, const std::string& subtitle,
                     std::vector<std::string> row_names = {});

}  // namespace trident
