// Numbers as people write them for counts and link speeds: 15T tokens, 300B, 1.5e13; a link of
// 400Gb/s per GPU as vendors quote it.
#pragma once

#include <optional>
#include <string>

namespace trident {

// 1.5e13, 15T, 300B, 2.5M, 4K (upper case: K 1e3, M 1e6, B or G 1e9, T 1e12, P 1e15). Empty when the text is
// not such a number (or not finite).
std::optional<double> parse_count(const std::string& text);

// A bandwidth written with its unit: "400Gb/s", "3.2Tb/s" or "50GB/s" (bits or bytes per second,
// decimal prefixes), in bytes per second. Empty when the text has no such unit or no number.
std::optional<double> parse_rate_with_unit(const std::string& text);

}  // namespace trident
