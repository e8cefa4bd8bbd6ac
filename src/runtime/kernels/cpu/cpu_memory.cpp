// Host memory and the CpuKernels constructor (thread set-up).
#include <omp.h>
#include <sys/mman.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "runtime/kernels/cpu/cpu_kernels.h"

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_corename(void);

namespace trident::kernels {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
size_t round_up(size_t n) { return (n + kHuge - 1) / kHuge * kHuge; }
}  // namespace

void* host_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t len = round_up(bytes);
  // Over-map by one huge page so the returned block starts on a 2 MiB boundary.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw std::runtime_error("out of host memory: could not map " + std::to_string(bytes >> 20) + " MiB");
  uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHuge - 1) / kHuge * kHuge;
  if (aligned > base) munmap(raw, aligned - base);
  uintptr_t tail = aligned + len, end = base + len + kHuge;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, len, MADV_HUGEPAGE);
  std::memset(p, 0, len);  // pre-fault now rather than inside a training step
  return p;
}

void host_free(void* p, size_t bytes) {
  if (p) munmap(p, round_up(bytes == 0 ? 1 : bytes));
}

CpuKernels::CpuKernels(int threads) {
  threads_ = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(threads_);
  // OpenBLAS runs single-threaded inside each OpenMP thread (see gemm()).
  openblas_set_num_threads(1);
}

std::string blas_core_name() {
  const char* core = openblas_get_corename();
  return core ? core : "unknown";
}

std::string CpuKernels::device_name() const {
  return "cpu (" + std::to_string(threads_) + " OpenMP threads, OpenBLAS sgemm, core " + blas_core_name() + ")";
}

float* CpuKernels::alloc(size_t count) { return static_cast<float*>(host_alloc(count * sizeof(float))); }
void CpuKernels::free(float* p, size_t count) { host_free(p, count * sizeof(float)); }

void CpuKernels::zero(float* p, size_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) p[i] = 0.0f;
}
void CpuKernels::copy(float* dst, const float* src, size_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void CpuKernels::convert(const Tensor& dst, const Tensor& src) {
  std::memcpy(f32_data(dst, "convert"), f32_data(src, "convert", dst.count), dst.count * sizeof(float));
}
void CpuKernels::to_host(float* host, const float* src, size_t n) { std::memcpy(host, src, n * sizeof(float)); }
void CpuKernels::from_host(float* dst, const float* host, size_t n) { std::memcpy(dst, host, n * sizeof(float)); }

std::unique_ptr<Kernels> make_cpu_kernels(int threads) { return std::make_unique<CpuKernels>(threads); }

}  // namespace trident::kernels
