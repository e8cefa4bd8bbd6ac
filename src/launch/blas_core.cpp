#include "launch/blas_core.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

namespace trident::launch {

namespace {

constexpr const char* kReason = "TRIDENT_BLAS_CORE_REASON";  // why trident set the core type (for the note)

// XCR0: the register state the operating system saves on a context switch.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

}  // namespace

CpuFeatures cpu_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = c & bit_FMA, osxsave = c & bit_OSXSAVE, avx = c & bit_AVX;
  if (!osxsave || !avx) return f;
  const uint64_t state = xcr0();
  const bool ymm = (state & 0x6) == 0x6, zmm = ymm && (state & 0xe0) == 0xe0;
  unsigned b7 = 0, c7 = 0, d7 = 0, a7 = 0;
  if (!__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) return f;
  const bool avx2 = b7 & bit_AVX2;
  const bool avx512 = (b7 & bit_AVX512F) && (b7 & bit_AVX512CD) && (b7 & bit_AVX512BW) && (b7 & bit_AVX512DQ) &&
                      (b7 & bit_AVX512VL);
  if (b7 & bit_AVX512F) f.listed = avx512 ? "AVX-512F/CD/BW/DQ/VL" : "AVX-512F (without all of CD/BW/DQ/VL)";
  if (avx2) f.listed += std::string(f.listed.empty() ? "" : ", ") + "AVX2";
  if (fma) f.listed += std::string(f.listed.empty() ? "" : ", ") + "FMA";
  if (f.listed.empty()) f.listed = "AVX";
  if (!ymm) f.listed += " (the YMM state is not enabled by the OS)";
  else if ((b7 & bit_AVX512F) && !zmm) f.listed += " (the ZMM state is not enabled by the OS)";
  f.avx512 = avx512 && zmm;
  f.avx2_fma = avx2 && fma && ymm;
  return f;
}

BlasCoreChoice blas_core_for(const CpuFeatures& f) {
  const std::string why = "cpuid: " + (f.listed.empty() ? std::string("no AVX") : f.listed);
  if (f.avx512) return {"SkylakeX", why};
  if (f.avx2_fma) return {"Haswell", why};
  return {"", why};
}

void choose_blas_core() {
  unsetenv(kReason);  // only this process's choice is said to be trident's
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set && *set) return;  // the user's choice stands
  const BlasCoreChoice c = blas_core_for(cpu_features());
  if (c.core.empty()) {
    setenv(kReason, c.why.c_str(), 1);  // said in the note; OpenBLAS chooses
    return;
  }
  setenv("OPENBLAS_CORETYPE", c.core.c_str(), 1);
  setenv(kReason, c.why.c_str(), 1);
}

std::string blas_core_note(const std::string& running) {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const char* why = std::getenv(kReason);
  if (set && *set)
    return running + " (OPENBLAS_CORETYPE=" + set +
           (why ? std::string(" set by trident from ") + why : std::string(" from the environment")) + ")";
  return running + " (chosen by OpenBLAS itself" + (why ? std::string(": ") + why + ", no kernel family to force" : "") +
         ")";
}

}  // namespace trident::launch
