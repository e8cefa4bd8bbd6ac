// The FP32 peak of one core, the physical limit MFU and the cost table's shares are of: a
// hand-written loop of independent FMA chains in registers, on the widest FMA the CPU has (chosen
// from cpuid, as the OpenBLAS core type is). Each kernel is compiled for its own instruction set
// (target attributes; this folder is built without -march=native), so the probe runs on any
// x86-64 CPU and uses AVX-512 only where cpuid and the OS allow it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/blas_core.h"

namespace trident::launch {

// One loop: each iteration does one FMA (a = a * m + c) on each of `chains` independent
// accumulators of `lanes` floats. Enough chains cover the FMA latency times the FMA units
// (4 cycles x 2 units on Zen 4/5, Skylake-X, Sapphire Rapids: 8 in flight), and they still fit
// in the register file beside m and c, so the loop issues an FMA on every unit every cycle.
struct FmaLoop {
  std::string isa;   // "AVX-512", "AVX2", "SSE" (no FMA: a multiply and an add per chain)
  int chains = 0;    // independent accumulators
  int lanes = 0;     // floats per accumulator (vector register width / 4 bytes)
  int registers = 0; // vector registers of the instruction set (the chains + m + c must fit)
  bool fused = true; // one FMA instruction per chain and iteration (false: a multiply and an add)
};
// The widest loop the features allow: AVX-512 (16 chains of 16 floats in 32 zmm registers),
// AVX2 + FMA (12 chains of 8 floats in 16 ymm registers), else SSE (12 chains of 4 floats).
FmaLoop fma_loop_for(const CpuFeatures& f);

// FLOPs of `iterations` iterations: iterations x chains x lanes x 2 (a multiply and an add each).
double fma_loop_flops(const FmaLoop& loop, int64_t iterations);

// Runs the loop (lane values start at 1 + 0.01 x chain, m = 0.999999, c = 1e-7) and returns each
// chain's value (lane 0; every lane of a chain holds the same) after `iterations`: what a scalar
// fmaf gives after the same count, so a test can check every counted FMA was done. The loop must
// be one this CPU runs (fma_loop_for(cpu_features()) or narrower).
std::vector<float> run_fma_loop(const FmaLoop& loop, int64_t iterations);

struct FmaPeak {
  FmaLoop loop;
  double flops_per_s = 0;  // best run, per second of the thread's CPU time
  // "111.2 GFLOP/s per core (AVX-512 FMA, 16 chains of 16 floats)"
  std::string describe() const;
};
// This CPU's peak on the calling thread: the best of many short runs (about a millisecond each,
// at least 20 and about `budget_s` in all) of fma_loop_for(cpu_features()), timed with the
// thread's CPU clock, so other processes on a loaded machine do not lower it.
FmaPeak fma_peak(double budget_s = 0.3);

}  // namespace trident::launch
