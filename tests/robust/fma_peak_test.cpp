// The FMA peak probe's structure (no speed asserted: the suite runs on loaded machines; the rate
// against a hand-written loop is `make bench`'s bench/engine/fma_probe_ratio): the loop chosen
// from cpuid, chains that cover the FMA latency and fit the registers, the FLOPs it counts, and
// that it does every FMA it counts.
#include "launch/fma_peak.h"

#include <gtest/gtest.h>

#include <cmath>

namespace trident::launch {

TEST(FmaPeak, TheWidestLoopTheFeaturesAllowWithChainsCoveringTheLatency) {
  CpuFeatures f;
  EXPECT_EQ(fma_loop_for(f).isa, "SSE");
  EXPECT_FALSE(fma_loop_for(f).fused);
  f.avx2_fma = true;
  EXPECT_EQ(fma_loop_for(f).isa, "AVX2");
  EXPECT_EQ(fma_loop_for(f).lanes, 8);
  f.avx512 = true;
  EXPECT_EQ(fma_loop_for(f).isa, "AVX-512");
  EXPECT_EQ(fma_loop_for(f).lanes, 16);
  for (const CpuFeatures& g : {CpuFeatures{false, false, ""}, CpuFeatures{false, true, ""}, CpuFeatures{true, true, ""}}) {
    const FmaLoop l = fma_loop_for(g);
    // 4 cycles of FMA latency x 2 FMA units (Zen 4/5, Skylake-X, Sapphire Rapids): 8 in flight
    // at least; 12 and more also cover 5- and 6-cycle latencies.
    EXPECT_GE(l.chains, 12) << l.isa;
    EXPECT_LE(l.chains + 2, l.registers) << l.isa << ": the chains, m and c stay in registers";
  }
}

TEST(FmaPeak, FlopsCountedAreIterationsTimesChainsTimesLanesTimesTwo) {
  const FmaLoop l = fma_loop_for(cpu_features());
  EXPECT_DOUBLE_EQ(fma_loop_flops(l, 1000), 1000.0 * l.chains * l.lanes * 2);
  EXPECT_DOUBLE_EQ(fma_loop_flops({"AVX-512", 16, 16, 32, true}, 200000), 200000.0 * 16 * 16 * 2);
}

// Every chain ends where `iterations` scalar fmaf steps (or a multiply and an add without FMA)
// from its start end: the loop did the FMAs the FLOP count counts, on every chain.
TEST(FmaPeak, TheLoopDoesEveryFmaItCounts) {
  CpuFeatures here = cpu_features();
  std::vector<CpuFeatures> runnable = {CpuFeatures{}};
  if (here.avx2_fma) runnable.push_back(CpuFeatures{false, true, ""});
  if (here.avx512) runnable.push_back(CpuFeatures{true, true, ""});
  for (const CpuFeatures& f : runnable) {
    const FmaLoop l = fma_loop_for(f);
    const int64_t iterations = 1001;
    const std::vector<float> got = run_fma_loop(l, iterations);
    ASSERT_EQ(got.size(), size_t(l.chains)) << l.isa;
    for (int c = 0; c < l.chains; ++c) {
      volatile float m = 0.999999f, add = 1e-7f;
      float a = 1.0f + 0.01f * float(c);
      for (int64_t i = 0; i < iterations; ++i) {
        volatile float product = a * m;  // rounded on its own where the loop does not fuse
        a = l.fused ? std::fmaf(a, m, add) : product + add;
      }
      EXPECT_EQ(got[size_t(c)], a) << l.isa << " chain " << c;
    }
    // One iteration fewer ends elsewhere: the comparison can tell a missing FMA.
    EXPECT_NE(run_fma_loop(l, iterations - 1)[0], got[0]) << l.isa;
  }
}

TEST(FmaPeak, ThePeakNamesItsLoop) {
  const FmaPeak p = fma_peak(0.0);
  EXPECT_GT(p.flops_per_s, 0);
  EXPECT_EQ(p.loop.isa, fma_loop_for(cpu_features()).isa);
  const std::string d = p.describe();
  EXPECT_NE(d.find("GFLOP/s per core (" + p.loop.isa), std::string::npos) << d;
  EXPECT_NE(d.find(std::to_string(p.loop.chains) + " chains of " + std::to_string(p.loop.lanes) + " floats"),
            std::string::npos)
      << d;
}

}  // namespace trident::launch
