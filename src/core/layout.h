// Layout: how many ways each parallel dimension splits the work, and how the dimensions are
// laid onto consecutive ranks.
//
// The order string lists the dimensions with the fastest-varying first, as Megatron does:
// "tp-dp-pp" (the default) puts a TP group on consecutive ranks (inside one node), then DP,
// then PP outermost. "tp-pp-dp" is the source chapter's GPT-3 example: stage 0 of replica 0 on
// GPUs 0-7, stage 1 on GPUs 8-15, ... Context parallel (cp) is reserved: size 1 until the
// runtime supports it; when cp > 1 the order must name it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

enum class Dim { TP = 0, CP = 1, DP = 2, PP = 3 };
constexpr int kNumDims = 4;

std::string to_string(Dim dim);  // "tp", "cp", "dp", "pp"

struct Layout {
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t dp = 1;
  int64_t pp = 1;
  std::string order = "tp-dp-pp";

  int64_t size(Dim dim) const;
  int64_t world_size() const { return tp * cp * dp * pp; }
  // Dimensions from fastest to slowest varying, all four (cp placed first when the string omits it).
  std::array<Dim, kNumDims> dims_fastest_first() const;
  std::string describe() const;  // "tp 8 x pp 8 x dp 64 (order tp-pp-dp)"
};

// Checks sizes and the order string; adds every problem found.
void validate_layout(const Layout& layout, Problems& problems);

// Parses an order string ("tp-pp-dp"); adds a problem and returns false when it is malformed.
bool parse_order(const std::string& order, std::array<Dim, kNumDims>& dims, Problems& problems);

}  // namespace trident
