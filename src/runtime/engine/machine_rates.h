// What one CPU core of this machine reaches, measured through the kernels the trainer runs
// (the FMA peak, the physical limit, is launch/fma_peak's): matrix-product rates per size, the rate of the memory-bound
// kernels against a plain copy, and the fixed cost of one kernel call. `trident bench` turns
// them into a cluster description (peaks) and a cost table (achieved over peak). Times are of
// the calling thread's CPU clock, best of several calls: other processes on a loaded machine
// do not slow the figures down.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kernels/ops.h"

namespace trident::engine {

struct GemmRate {
  int64_t n = 0;        // n x n times n x n
  double seconds = 0;   // best call time
  double flops_per_s = 0;
};
// Best time of an n^3 sgemm through k.gemm for each n (each size measured for ~budget_s).
std::vector<GemmRate> gemm_rates(kernels::Kernels& k, const std::vector<int64_t>& sizes, double budget_s);

// Best time of one 1x1x1 sgemm call: the fixed cost every kernel call pays.
double kernel_call_s(kernels::Kernels& k);

// STREAM-style copy of `bytes` (memcpy), bytes read + written per second: the memory peak.
double copy_bandwidth_Bps(size_t bytes);

struct ElementwiseRate {
  const char* kernel = "";
  double bytes_moved = 0;  // read + written per call
  double seconds = 0;      // best call time
};
// The trainer's memory-bound kernels of a model family over `floats` elements each: add, GELU and
// layer norm (GPT), or add, SwiGLU and RMS norm (Llama). On a CPU the activations' exponentials
// make them compute-bound, so the family changes the memory-bound kernels' share.
std::vector<ElementwiseRate> elementwise_rates(kernels::Kernels& k, size_t floats, bool llama = false);

// Best time of the trainer's optimizer pass over `floats` parameters: the gradient's sum of
// squares (the norm for clipping) and the AdamW update with the clip scale folded in, the two
// calls the trainer makes per piece. On a CPU the update's square root and division make it
// slower than its 28 bytes per parameter at the memory rate.
double optimizer_seconds(kernels::Kernels& k, size_t floats);

}  // namespace trident::engine
