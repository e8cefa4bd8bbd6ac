// Unit helpers. Quantities are plain doubles in SI base units (bytes, seconds, FLOP,
// bytes per second, FLOP per second); names carry the unit as a suffix (_bytes, _s, _Bps,
// _flops) so a formula's units can be read off its variables.
#pragma once

#include <cstdint>

namespace trident {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * kKiB;
constexpr double kGiB = 1024.0 * kMiB;
constexpr double kGB = 1e9;     // decimal gigabyte: link and HBM bandwidths are quoted in GB/s
constexpr double kTera = 1e12;  // TFLOP/s
constexpr double kMicro = 1e-6;

inline double gib(double bytes) { return bytes / kGiB; }
inline double gbps(double bytes_per_s) { return bytes_per_s / kGB; }  // GB/s (decimal)

}  // namespace trident
