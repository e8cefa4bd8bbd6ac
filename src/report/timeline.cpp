#include "report/timeline.h"

#include <algorithm>

namespace trident {

double Timeline::end_s() const {
  double end = 0;
  for (const auto& b : blocks) end = std::max(end, b.end_s);
  return end;
}

}  // namespace trident
