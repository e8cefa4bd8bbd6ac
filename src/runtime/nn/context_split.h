// ContextSplit: which tokens of each sequence a context-parallel rank holds, and which block
// pairs of ring attention it computes.
//
// Causal load balancing (Megatron-Core's context parallel): a sequence of T tokens is cut into
// 2 cp chunks of T / (2 cp); rank r holds chunks r and 2cp-1-r, as its local rows [0, c) and
// [c, 2c) (c = the chunk length). Every rank then does the same causal attention work: against
// its own keys and values the pair is causal over its 2c rows (its early chunk never sees its
// late one); against the keys of rank s < r all its queries see s's early chunk and none of s's
// late one; against s > r only its late chunk's queries see keys, and all of them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/kernels/ops.h"

namespace trident::nn {

struct ContextSplit {
  int64_t cp = 1, rank = 0;
  int64_t T = 0;  // tokens of a whole sequence

  bool active() const { return cp > 1; }
  int64_t chunk() const { return T / (2 * cp); }
  int64_t local() const { return T / cp; }  // rows of a sequence this rank holds
  // Position in the whole sequence of local chunk k (0: rows [0, c), 1: rows [c, 2c)) of rank r.
  int64_t first_position(int k, int64_t r) const { return (k == 0 ? r : 2 * cp - 1 - r) * chunk(); }
  int64_t first_position(int k) const { return first_position(k, rank); }
  // Position in the whole sequence of rank r's local row j (0 <= j < local()).
  int64_t position(int64_t j, int64_t r) const {
    return j < chunk() ? first_position(0, r) + j : first_position(1, r) + (j - chunk());
  }
  int64_t position(int64_t j) const { return active() ? position(j, rank) : j; }
  // The block pair of this rank's queries against the keys and values rank `source` holds
  // (every pair has some work, so the ring never skips a step); a sliding window of `window`
  // keys masks by the rows' whole-sequence positions.
  kernels::Kernels::AttentionBlock block(int64_t source, int64_t B, int64_t nh, int64_t nkv, int64_t hd,
                                         int64_t window = 0) const {
    kernels::Kernels::AttentionBlock b;
    b.B = B, b.T = local(), b.nh = nh, b.nkv = nkv, b.hd = hd;
    b.window = window, b.chunk = chunk();
    for (int k = 0; k < 2; ++k) b.q_first[k] = first_position(k), b.k_first[k] = first_position(k, source);
    const int64_t c = chunk();
    if (source == rank) b.q0 = 0, b.nq = 2 * c, b.k0 = 0, b.nk = 2 * c, b.causal = true;
    else if (source < rank) b.q0 = 0, b.nq = 2 * c, b.k0 = 0, b.nk = c;
    else b.q0 = c, b.nq = c, b.k0 = 0, b.nk = 2 * c;
    return b;
  }
};

// A pair cut into `parts` runs of query rows (multiples of 64 rows, the kernels' blocks), each
// with the keys it sees: together they compute the pair (ring attention polls its messages
// between them, since MPI moves a message only inside its calls).
inline std::vector<kernels::Kernels::AttentionBlock> query_pieces(const kernels::Kernels::AttentionBlock& b,
                                                                  int64_t parts) {
  std::vector<kernels::Kernels::AttentionBlock> out;
  const int64_t rows = std::max<int64_t>(64, (b.nq + parts - 1) / parts / 64 * 64);
  for (int64_t q = 0; q < b.nq; q += rows) {
    kernels::Kernels::AttentionBlock p = b;
    p.q0 = b.q0 + q, p.nq = std::min(rows, b.nq - q);
    if (b.causal) p.nk = p.q0 + p.nq - b.k0;  // keys up to the last query's diagonal
    out.push_back(p);
  }
  return out;
}

}  // namespace trident::nn
