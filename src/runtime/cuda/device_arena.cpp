#include "runtime/cuda/device_arena.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "core/problems.h"
#include "runtime/cuda/cuda_check.h"

namespace trident::cuda {

namespace {
std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(size_t(1) << 30));
  return text;
}
}  // namespace

DeviceArena::~DeviceArena() {
  if (base_) cudaFree(base_);
}

size_t DeviceArena::add(std::string name, size_t bytes) {
  regions_.push_back({std::move(name), total_, bytes});
  total_ += (bytes + 255) / 256 * 256;
  return regions_.size() - 1;
}

std::string out_of_memory_message(size_t requested, size_t free_bytes, size_t total_bytes, double predicted_bytes,
                                  const std::vector<ArenaRegion>& regions) {
  std::vector<ArenaRegion> largest = regions;
  std::sort(largest.begin(), largest.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::string text = "out of GPU memory: the model needs " + gib(double(requested)) + " but the GPU has " +
                     gib(double(free_bytes)) + " free of " + gib(double(total_bytes));
  text += predicted_bytes > 0 ? "; the planner predicted " + gib(predicted_bytes) + " per GPU"
                              : "; no planner prediction was given";
  text += "; largest parts:";
  for (size_t i = 0; i < largest.size() && i < 4; ++i) text += " " + largest[i].name + " " + gib(double(largest[i].bytes));
  return text;
}

void DeviceArena::allocate(double predicted_bytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, total_);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    Problems problems;
    problems.add(out_of_memory_message(total_, free_bytes, total_bytes, predicted_bytes, regions_),
                 "lower --micro-batch-size or the sequence length, or add tensor/pipeline parallelism "
                 "(trident plan shows the memory of each layout)",
                 "gpu-out-of-memory");
    problems.throw_if_any();
  }
  cudaCheck(err);
  base_ = static_cast<char*>(p);
}

void* DeviceArena::pointer(size_t region) const { return base_ + regions_.at(region).offset; }

}  // namespace trident::cuda
