// Which kernels OpenBLAS runs. Its own CPU detection knows the models of its release only:
// Debian's 0.3.21 takes a Xeon of model 207 for an unknown CPU and runs its SSE3 ("Prescott")
// kernels, a quarter of what its AVX-512 kernels reach there. OpenBLAS reads OPENBLAS_CORETYPE
// once, as it loads: `trident` chooses the core type from the CPU's features (cpuid) and sets it
// before it loads the runtime library, unless the user (or CI) has set it.
#pragma once

#include <string>

namespace trident::launch {

// The features that decide between OpenBLAS's x86-64 kernel families, each usable only when
// the operating system saves its registers (XGETBV).
struct CpuFeatures {
  bool avx512 = false;  // AVX-512 F, CD, BW, DQ and VL, with the ZMM and mask state enabled
  bool avx2_fma = false;  // AVX2 and FMA3, with the YMM state enabled
  std::string listed;   // "AVX-512F/CD/BW/DQ/VL, AVX2, FMA" (what was found, for the note)
};
CpuFeatures cpu_features();  // this CPU's, from cpuid

struct BlasCoreChoice {
  std::string core;  // "SkylakeX", "Haswell"; empty: leave it to OpenBLAS
  std::string why;   // "cpuid: AVX-512F/CD/BW/DQ/VL, AVX2, FMA"
};
// SkylakeX kernels where AVX-512 is usable (OpenBLAS's newer AVX-512 targets run the same sgemm),
// Haswell where AVX2 and FMA are, else none (OpenBLAS's detection is then as good as any).
BlasCoreChoice blas_core_for(const CpuFeatures& f);

// Called before the runtime library (and so OpenBLAS) loads: sets OPENBLAS_CORETYPE from
// blas_core_for(cpu_features()) when the environment has none (and the reason, for the note).
void choose_blas_core();

// The start-up table's words for the core OpenBLAS runs (`running`, its openblas_get_corename):
// "SkylakeX (OPENBLAS_CORETYPE=SkylakeX set by trident from cpuid: AVX-512F/...)", "... from the
// environment" or "... chosen by OpenBLAS itself (...)".
std::string blas_core_note(const std::string& running);

}  // namespace trident::launch
