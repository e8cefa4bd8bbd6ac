#include "launch/fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

namespace trident::launch {

namespace {

constexpr float kM = 0.999999f, kC = 1e-7f;  // a * m + c stays near its start: no overflow, no denormals
float start_value(int chain) { return 1.0f + 0.01f * float(chain); }

// The accumulators are named variables, not an array: an array of vectors that GCC keeps in
// memory turns every FMA into a load, an FMA and a store, and the store-to-load latency, not the
// FMA units, sets the rate (the probe this replaced read 42.7 GFLOP/s where the units give 111).
#define TRIDENT_CHAINS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define TRIDENT_CHAINS_16(X) TRIDENT_CHAINS_12(X) X(12) X(13) X(14) X(15)

__attribute__((target("avx512f"))) void loop_avx512(int64_t iterations, float* out) {
  const __m512 m = _mm512_set1_ps(kM), c = _mm512_set1_ps(kC);
#define DECLARE(i) __m512 a##i = _mm512_set1_ps(start_value(i));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define STORE(i) out[i] = _mm512_cvtss_f32(a##i);
  TRIDENT_CHAINS_16(DECLARE)
  for (int64_t it = 0; it < iterations; ++it) {
    TRIDENT_CHAINS_16(STEP)
  }
  TRIDENT_CHAINS_16(STORE)
#undef DECLARE
#undef STEP
#undef STORE
}

__attribute__((target("avx2,fma"))) void loop_avx2(int64_t iterations, float* out) {
  const __m256 m = _mm256_set1_ps(kM), c = _mm256_set1_ps(kC);
#define DECLARE(i) __m256 a##i = _mm256_set1_ps(start_value(i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define STORE(i) out[i] = _mm256_cvtss_f32(a##i);
  TRIDENT_CHAINS_12(DECLARE)
  for (int64_t it = 0; it < iterations; ++it) {
    TRIDENT_CHAINS_12(STEP)
  }
  TRIDENT_CHAINS_12(STORE)
#undef DECLARE
#undef STEP
#undef STORE
}

// No FMA: a multiply then an add, rounded twice (what a CPU without FMA3 computes).
void loop_sse(int64_t iterations, float* out) {
  const __m128 m = _mm_set1_ps(kM), c = _mm_set1_ps(kC);
#define DECLARE(i) __m128 a##i = _mm_set1_ps(start_value(i));
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
#define STORE(i) out[i] = _mm_cvtss_f32(a##i);
  TRIDENT_CHAINS_12(DECLARE)
  for (int64_t it = 0; it < iterations; ++it) {
    TRIDENT_CHAINS_12(STEP)
  }
  TRIDENT_CHAINS_12(STORE)
#undef DECLARE
#undef STEP
#undef STORE
}

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

FmaLoop fma_loop_for(const CpuFeatures& f) {
  if (f.avx512) return {"AVX-512", 16, 16, 32, true};
  if (f.avx2_fma) return {"AVX2", 12, 8, 16, true};
  return {"SSE", 12, 4, 16, false};
}

double fma_loop_flops(const FmaLoop& loop, int64_t iterations) {
  return double(iterations) * loop.chains * loop.lanes * 2.0;
}

std::vector<float> run_fma_loop(const FmaLoop& loop, int64_t iterations) {
  std::vector<float> out(size_t(std::max(loop.chains, 16)), 0.0f);
  if (loop.isa == "AVX-512") loop_avx512(iterations, out.data());
  else if (loop.isa == "AVX2") loop_avx2(iterations, out.data());
  else loop_sse(iterations, out.data());
  out.resize(size_t(loop.chains));
  return out;
}

std::string FmaPeak::describe() const {
  return fmt::format("{:.1f} GFLOP/s per core ({} {}, {} chains of {} floats)", flops_per_s / 1e9, loop.isa,
                     loop.fused ? "FMA" : "multiply + add", loop.chains, loop.lanes);
}

FmaPeak fma_peak(double budget_s) {
  FmaPeak p;
  p.loop = fma_loop_for(cpu_features());
  // About a millisecond per run: short enough that some run falls between two interruptions of a
  // loaded machine, long enough that the clock's reading cost is nothing beside it.
  const int64_t iterations = 200000;
  double spent = 0;
  for (int rep = 0; rep < 20 || (spent < budget_s && rep < 4000); ++rep) {
    const double t0 = thread_cpu_s();
    const std::vector<float> values = run_fma_loop(p.loop, iterations);
    const double dt = thread_cpu_s() - t0;
    spent += dt;
    if (dt > 0 && values[0] > 0) p.flops_per_s = std::max(p.flops_per_s, fma_loop_flops(p.loop, iterations) / dt);
  }
  return p;
}

}  // namespace trident::launch
