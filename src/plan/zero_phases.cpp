#include "plan/zero_phases.h"

namespace trident::plan {

std::vector<ZeroPhase> zero_phases(int zero, int64_t m, double gradient_bytes, double weight_bytes, int64_t dp) {
  std::vector<ZeroPhase> out;
  if (dp <= 1) return out;
  const int64_t mb = m < 1 ? 1 : m;
  using C = DpCollective;
  using W = DpWhen;
  using B = DpBuffer;
  if (zero <= 0) {
    out.push_back({C::AllReduce, W::AfterLastBackward, B::Gradients, gradient_bytes, 1});
  } else if (zero == 1) {
    out.push_back({C::ReduceScatter, W::AfterLastBackward, B::Gradients, gradient_bytes, 1});
    out.push_back({C::AllGather, W::AfterOptimizer, B::Weights, weight_bytes, 1});
  } else if (zero == 2) {
    out.push_back({C::ReduceScatter, W::AfterEveryBackward, B::Gradients, gradient_bytes, mb});
    out.push_back({C::AllGather, W::AfterOptimizer, B::Weights, weight_bytes, 1});
  } else {
    out.push_back({C::AllGather, W::InsideEveryPass, B::Weights, weight_bytes, 2 * mb});  // forward and backward
    out.push_back({C::ReduceScatter, W::InsideEveryPass, B::Gradients, gradient_bytes, mb});
  }
  return out;
}

int64_t collectives_per_step(const std::vector<ZeroPhase>& phases) {
  int64_t n = 0;
  for (const ZeroPhase& p : phases) n += p.per_step;
  return n;
}

double bytes_per_step(const std::vector<ZeroPhase>& phases) {
  double b = 0;
  for (const ZeroPhase& p : phases) b += double(p.per_step) * p.bytes;
  return b;
}

std::string to_string(DpCollective c) {
  switch (c) {
    case DpCollective::AllReduce: return "all-reduce";
    case DpCollective::ReduceScatter: return "reduce-scatter";
    case DpCollective::AllGather: return "all-gather";
  }
  return "?";
}

std::string to_string(DpWhen w) {
  switch (w) {
    case DpWhen::AfterLastBackward: return "after the last backward";
    case DpWhen::AfterEveryBackward: return "after every backward";
    case DpWhen::AfterOptimizer: return "after the optimizer";
    case DpWhen::InsideEveryPass: return "inside every pass";
  }
  return "?";
}

}  // namespace trident::plan
