// DeviceArena: all of a model's GPU memory in one cudaMalloc, made once and carved into named
// regions, so nothing is allocated during training. Running out of memory is an InputError that
// says how much was asked, how much the GPU had free, and what the planner predicted.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace trident::cuda {

struct ArenaRegion {
  std::string name;
  size_t offset = 0, bytes = 0;
};

// Two passes: add() every region (sizes only), then allocate() once; pointer(i) gives region i.
class DeviceArena {
 public:
  DeviceArena() = default;
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  size_t add(std::string name, size_t bytes);  // returns the region's index; 256-byte aligned
  // predicted_bytes: the planner's prediction for this rank (0 when unknown).
  void allocate(double predicted_bytes = 0.0);
  void* pointer(size_t region) const;
  size_t total_bytes() const { return total_; }
  const std::vector<ArenaRegion>& regions() const { return regions_; }

 private:
  std::vector<ArenaRegion> regions_;
  size_t total_ = 0;
  char* base_ = nullptr;
};

// The out-of-memory message, with every number, e.g. for tests.
std::string out_of_memory_message(size_t requested, size_t free_bytes, size_t total_bytes, double predicted_bytes,
                                  const std::vector<ArenaRegion>& largest);

}  // namespace trident::cuda
