// FP32 peak of this machine: independent FMA chains on every core (OpenMP), widest vectors
// the compiler targets (-march=native: AVX-512 here). Prints one JSON line
// {"threads", "gflops", "vector_floats"}. The engine benchmark divides achieved FLOP/s by it.
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

int main() {
  const long iters = 200000000 / 16;
  double best = 0;
  int threads = 1;
#if defined(__AVX512F__)
  using V = __m512;
  const int width = 16;
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SET(x) _mm512_set1_ps(x)
#define SUM(v) _mm512_reduce_add_ps(v)
#else
  using V = __m256;
  const int width = 8;
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SET(x) _mm256_set1_ps(x)
#define SUM(v) (v[0] + v[7])
#endif
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
      threads = omp_get_num_threads();
      V a0 = SET(1.0f), a1 = SET(1.1f), a2 = SET(1.2f), a3 = SET(1.3f), a4 = SET(1.4f), a5 = SET(1.5f),
        a6 = SET(1.6f), a7 = SET(1.7f), a8 = SET(1.8f), a9 = SET(1.9f), a10 = SET(2.0f), a11 = SET(2.1f);
      const V m = SET(0.999999f), c = SET(1e-7f);
      for (long i = 0; i < iters; ++i) {
        a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);
        a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);
        a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c);
      }
      V s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
      sink += SUM(s);
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flops = 2.0 * 12.0 * width * double(iters) * threads;
    if (flops / dt > best) best = flops / dt;
    if (sink == 42.0f) std::printf(" ");
  }
  std::printf("{\"threads\": %d, \"gflops\": %.1f, \"vector_floats\": %d}\n", threads, best / 1e9, width);
  return 0;
}
