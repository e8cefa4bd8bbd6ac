// A zeroed buffer of fp32 elements in the kernels' device memory (the one allocator: host memory
// for the CPU backend, GPU memory for CUDA), freed with it. Everything the trainer hands a
// communicator lives in one of these or in the stage's own buffers, so NCCL gets device memory.
#pragma once

#include <cstddef>
#include <utility>

#include "runtime/kernels/ops.h"

namespace trident::parallel {

struct DeviceBuffer {
  kernels::Kernels* k = nullptr;
  float* p = nullptr;
  size_t n = 0;
  DeviceBuffer() = default;
  DeviceBuffer(kernels::Kernels& kernels, size_t count) : k(&kernels), n(count) {
    if (n > 0) p = k->alloc(n), k->zero(p, n);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : k(o.k), p(o.p), n(o.n) { o.p = nullptr, o.n = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(k, o.k), std::swap(p, o.p), std::swap(n, o.n);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p) k->free(p, n);
  }
};

}  // namespace trident::parallel
