// Performance figures (see perf.h).
#include "runtime/engine/perf.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace trident::engine {

double measure_matmul_flops(kernels::Kernels& k) {
  const int64_t n = 1536;
  float* a = k.alloc(size_t(n * n));
  float* b = k.alloc(size_t(n * n));
  float* c = k.alloc(size_t(n * n));
  // The buffers are the device's (GPU memory on CUDA): fill them from the host through the kernels.
  std::vector<float> host(size_t(n * n));
  for (int64_t i = 0; i < n * n; ++i) host[size_t(i)] = 1e-3f * float(i % 97);
  k.from_host(a, host.data(), host.size());
  k.from_host(b, host.data(), host.size());
  double best = 0.0, spent = 0.0;
  for (int rep = 0; rep < 8 && spent < 0.3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    k.gemm(kernels::Trans::N, kernels::Trans::T, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    k.synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += dt;
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / dt);
  }
  k.free(a, size_t(n * n));
  k.free(b, size_t(n * n));
  k.free(c, size_t(n * n));
  return best;
}

double peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;
}

}  // namespace trident::engine
