// The middle of measured values: the trainer's median step and the rehearsal report's measured
// load imbalance take it.
#pragma once

#include <algorithm>
#include <vector>

namespace trident {

// The middle of the values (the mean of the two middle ones for an even count); not empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace trident
