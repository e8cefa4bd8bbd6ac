// Layout: how many ways each parallel dimension splits the work, and how the dimensions are
// laid onto consecutive ranks.
//
// The order string lists the dimensions with the fastest-varying first, as Megatron does:
// "tp-dp-pp" (the default without cp or ep) puts a TP group on consecutive ranks (inside one
// node), then DP, then PP outermost. "tp-pp-dp" is the source chapter's GPT-3 example: stage 0
// of replica 0 on GPUs 0-7, stage 1 on GPUs 8-15, ... With context parallel (cp) or expert
// parallel (ep) the default is Megatron-Core's "tp-cp-ep-dp-pp".
//
// tp, cp, dp and pp multiply to the world size. ep does not: as in Megatron-Core it splits the
// data ranks (the cp x dp ranks of one tp rank and one stage) for the expert layers, so
// ep divides cp x dp and the expert gradients are reduced over the remaining
// cp x dp / ep ranks (the expert-data-parallel group, edp). In the order string ep stands next
// to dp: "ep-dp" takes each ep group from consecutive data ranks, "dp-ep" strides it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"

namespace trident {

// The four dense dimensions (TP..PP) index Coords; ETP, EP and EDP are the expert grid's groups
// (expert tensor parallel, expert parallel, expert data parallel: the expert gradients), DCP the
// dense gradient group (dp x cp, Megatron's data-parallel group with context parallel).
enum class Dim { TP = 0, CP = 1, DP = 2, PP = 3, EP = 4, EDP = 5, DCP = 6, ETP = 7 };
constexpr int kNumDims = 4;  // dense dimensions, the ones a rank has a coordinate in

std::string to_string(Dim dim);  // "tp", "cp", "dp", "pp", "ep", "edp", "dp-cp", "etp"

struct Layout {
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t dp = 1;
  int64_t pp = 1;
  std::string order = "tp-dp-pp";
  int64_t ep = 1;
  int64_t etp = 1;  // expert tensor parallel: 1 keeps each routed expert whole (folded over tp)

  int64_t size(Dim dim) const;
  int64_t world_size() const { return tp * cp * dp * pp; }
  // Dense dimensions from fastest to slowest varying, all four (cp placed first when the string omits it).
  std::array<Dim, kNumDims> dims_fastest_first() const;
  // The expert grid's dimensions (ETP, EP, EDP, PP) from fastest to slowest varying: the order
  // string with tp read as etp, dp as edp, cp left out (ep placed first when the string omits it).
  std::array<Dim, kNumDims> expert_dims_fastest_first() const;
  std::string describe() const;  // "tp 8 x pp 8 x dp 64 (order tp-pp-dp)"
};

// The default order for a layout: "tp-dp-pp", or "tp-cp-ep-dp-pp" when cp or ep is above 1.
std::string default_order(int64_t cp, int64_t ep);

// Checks sizes and the order string; adds every problem found.
void validate_layout(const Layout& layout, Problems& problems);

// Parses an order string ("tp-pp-dp"); adds a problem and returns false when it is malformed.
bool parse_order(const std::string& order, std::array<Dim, kNumDims>& dims, Problems& problems);

}  // namespace trident
