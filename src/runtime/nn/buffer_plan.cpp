#include "runtime/nn/buffer_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace trident::nn {

namespace {
constexpr size_t kAlign = 256;  // bytes: cuBLASLt's and the vector loads' best alignment
}

BufferPlan::~BufferPlan() {
  if (base_) k_.free(base_, floats_);
}

size_t BufferPlan::add(const std::string& name, kernels::DType t, size_t count) {
  if (base_) throw std::logic_error("BufferPlan::add after allocate");
  regions_.push_back({name, t, count, bytes_});
  bytes_ += (count * comm::dtype_size(t) + kAlign - 1) / kAlign * kAlign;
  return regions_.size() - 1;
}

void BufferPlan::allocate() {
  floats_ = std::max<size_t>(1, bytes_ / sizeof(float));
  base_ = k_.alloc(floats_);
  k_.zero(base_, floats_);
}

kernels::Tensor BufferPlan::tensor(size_t i) const {
  const Region& r = regions_.at(i);
  return {reinterpret_cast<char*>(base_) + r.offset, r.dtype, r.count};
}

float* BufferPlan::f32(size_t i) const { return kernels::f32_data(tensor(i), regions_.at(i).name.c_str()); }

std::string BufferPlan::table(const std::string& title) const {
  std::map<std::string, std::pair<size_t, kernels::DType>> by_name;
  for (const Region& r : regions_) {
    auto& e = by_name.try_emplace(r.name, 0, r.dtype).first->second;
    e.first += r.count * comm::dtype_size(r.dtype);
  }
  std::vector<std::pair<std::string, std::pair<size_t, kernels::DType>>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string text = title + "\n";
  char line[200];
  for (const auto& [name, e] : rows) {
    std::snprintf(line, sizeof(line), "  %-34s %-4s %12.3f MiB\n", name.c_str(), comm::dtype_name(e.second),
                  double(e.first) / (1 << 20));
    text += line;
  }
  std::snprintf(line, sizeof(line), "  %-34s %-4s %12.3f MiB (one allocation, 256-byte aligned regions)\n", "total",
                "", double(bytes_) / (1 << 20));
  return text + line;
}

}  // namespace trident::nn
