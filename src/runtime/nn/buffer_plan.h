// BufferPlan: one allocation carved into named, typed, 256-byte aligned regions (llm.c's flat
// buffers; the arena GptCuda had). Plan every region with add(), allocate() once, then read the
// views; nothing is allocated while training. table() is the start-up allocation table: bytes
// per region name (regions of the same name, e.g. one per layer, are summed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/kernels/ops.h"

namespace trident::nn {

class BufferPlan {
 public:
  explicit BufferPlan(kernels::Kernels& k) : k_(k) {}
  ~BufferPlan();
  BufferPlan(const BufferPlan&) = delete;
  BufferPlan& operator=(const BufferPlan&) = delete;

  // Adds a region of `count` elements of type t; returns its index. Before allocate() only.
  size_t add(const std::string& name, kernels::DType t, size_t count);
  size_t add_f32(const std::string& name, size_t count) { return add(name, kernels::DType::F32, count); }
  void allocate();  // one Kernels::alloc, zeroed

  kernels::Tensor tensor(size_t region) const;
  float* f32(size_t region) const;  // the region must be F32
  size_t bytes() const { return bytes_; }
  // "  name  dtype  MiB" per region name, largest first, then the total.
  std::string table(const std::string& title) const;

 private:
  struct Region {
    std::string name;
    kernels::DType dtype;
    size_t count, offset;  // offset in bytes
  };
  kernels::Kernels& k_;
  std::vector<Region> regions_;
  size_t bytes_ = 0;
  float* base_ = nullptr;
  size_t floats_ = 0;
};

}  // namespace trident::nn
