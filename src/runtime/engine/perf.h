// Performance figures the training progress line shows, each checkable by hand.
#pragma once

#include <cstdint>

#include "core/model_spec.h"
#include "runtime/kernels/ops.h"

namespace trident::engine {

// Measured fp32 matrix-product rate of this device (FLOP/s): a 1536^3 sgemm through the
// kernels' own gemm (all threads), best of a few runs over ~0.3 s. MFU divides by this.
double measure_matmul_flops(kernels::Kernels& k);

// Peak resident memory of this process so far (bytes, from getrusage).
double peak_rss_bytes();

}  // namespace trident::engine
