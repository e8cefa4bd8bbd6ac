#include "core/checked_size.h"

#include <fmt/format.h>

#include <limits>

namespace trident {

std::optional<int64_t> checked_product(const std::string& what, const std::vector<SizeTerm>& terms,
                                       int64_t limit, const std::string& fix, Problems& problems) {
  int64_t product = 1;
  long double approx = 1;  // for the message only: the true size even when it overflows
  bool fits = true;
  std::string shown;
  for (const SizeTerm& t : terms) {
    shown += (shown.empty() ? "" : " x ") + t.name + " " + std::to_string(t.value);
    approx *= static_cast<long double>(t.value);
    if (t.value < 0 || __builtin_mul_overflow(product, t.value, &product)) fits = false;
  }
  if (fits && product <= limit) return product;
  if (approx < 0)
    problems.add(fmt::format("{}: {} is negative, not a size", what, shown), fix, "size-overflow");
  else
    problems.add(fmt::format("{}: {} = {:.3g}, above the most Trident handles ({})", what, shown,
                             static_cast<double>(approx), limit == kMaxCount ? "2^62" : std::to_string(limit)),
                 fix, "size-overflow");
  return std::nullopt;
}

std::optional<int> checked_int(const std::string& what, int64_t value, Problems& problems) {
  if (value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max()) return int(value);
  problems.add(fmt::format("{} is {}, which does not fit a 32-bit integer", what, value),
               fmt::format("give a value of at most {}", std::numeric_limits<int>::max()), "size-overflow");
  return std::nullopt;
}

int64_t CheckedCount::value(const std::string& what) const {
  if (ok_) return v_;
  Problems p;
  p.add(fmt::format("{} is larger than 2^62 (it overflows 64-bit arithmetic)", what),
        "use smaller sizes (--layers, --hidden, --vocab, --seq-len, batch sizes)", "size-overflow");
  p.throw_if_any();
  return 0;
}

CheckedCount operator+(CheckedCount a, CheckedCount b) {
  int64_t r = 0;
  if (!a.ok_ || !b.ok_ || __builtin_add_overflow(a.v_, b.v_, &r)) return CheckedCount::overflowed();
  return CheckedCount(r);
}

CheckedCount operator-(CheckedCount a, CheckedCount b) {
  int64_t r = 0;
  if (!a.ok_ || !b.ok_ || __builtin_sub_overflow(a.v_, b.v_, &r)) return CheckedCount::overflowed();
  return CheckedCount(r);
}

CheckedCount operator*(CheckedCount a, CheckedCount b) {
  int64_t r = 0;
  if (!a.ok_ || !b.ok_ || __builtin_mul_overflow(a.v_, b.v_, &r)) return CheckedCount::overflowed();
  return CheckedCount(r);
}

}  // namespace trident
