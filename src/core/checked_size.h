// Checked size arithmetic: the one place where counts (GPUs, stages, sequences, tokens,
// parameters, bytes) are multiplied, added and narrowed.
//
// Every option is range-checked on its own (0 .. 2^31-1 for an integer), but a product of
// four of them overflows 64 bits and a fitting product can still be absurd (a cluster of
// 10^11 GPUs is a loop that never ends). So a size is computed as a product of named terms
// and checked against a limit; a size over it becomes a Problem naming every term, never a
// wrapped negative or a loop over billions of ranks.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

// The most GPUs (ranks) Trident describes: 2^20, beyond any cluster built; every per-rank table
// (mesh, topology, simulation) stays a few seconds and hundreds of MiB at this size.
inline constexpr int64_t kMaxGpus = int64_t(1) << 20;
// The most blocks (micro-batch x stage x chunk) one simulated step holds: about a GiB and a few seconds.
inline constexpr int64_t kMaxPipelineBlocks = int64_t(1) << 22;
// The most of anything else (parameters, tokens, bytes): 2^62, so a sum of two still fits int64.
inline constexpr int64_t kMaxCount = int64_t(1) << 62;

// A factor with the flag or quantity it comes from: {"tp", 8}.
struct SizeTerm {
  std::string name;
  int64_t value;
};

// The product of the terms. When a term is negative or the product exceeds `limit`, adds one
// problem ("world size tp 8 x pp 8 x dp 2147483647 = 1.37e+11 is above 1048576 ...") with the
// fix and returns nullopt.
std::optional<int64_t> checked_product(const std::string& what, const std::vector<SizeTerm>& terms,
                                       int64_t limit, const std::string& fix, Problems& problems);

// `value` as an int, or a problem naming it and nullopt when it does not fit.
std::optional<int> checked_int(const std::string& what, int64_t value, Problems& problems);

// A 64-bit count whose arithmetic remembers an overflow instead of wrapping, for formulas with
// many terms (parameter counts, byte counts). Read it with value(what), which throws InputError
// naming `what` when any step overflowed or went beyond kMaxCount.
class CheckedCount {
 public:
  constexpr CheckedCount(int64_t v = 0) : v_(v), ok_(v >= -kMaxCount && v <= kMaxCount) {}  // NOLINT: implicit
  bool ok() const { return ok_; }
  int64_t value(const std::string& what) const;
  int64_t value_or(int64_t fallback) const { return ok_ ? v_ : fallback; }

  friend CheckedCount operator+(CheckedCount a, CheckedCount b);
  friend CheckedCount operator-(CheckedCount a, CheckedCount b);
  friend CheckedCount operator*(CheckedCount a, CheckedCount b);

 private:
  static CheckedCount overflowed() {
    CheckedCount c;
    c.ok_ = false;
    return c;
  }
  int64_t v_;
  bool ok_;
};

}  // namespace trident
