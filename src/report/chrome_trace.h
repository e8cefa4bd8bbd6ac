// Chrome trace (Trace Event Format, JSON) of a Timeline: opens in https://ui.perfetto.dev and
// chrome://tracing. One process, one thread (track) per row and lane, complete ("X") events in
// microseconds; each event's args carry micro-batch, chunk and duration.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/timeline.h"

namespace trident {

nlohmann::json chrome_trace_json(const Timeline& timeline);
// Writes the trace; returns false (and sets error) when the file cannot be written.
bool write_chrome_trace(const Timeline& timeline, const std::string& path, std::string& error);

}  // namespace trident
