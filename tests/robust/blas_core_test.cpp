// Which OpenBLAS kernels trident asks for: the widest family the CPU's features allow, never
// over a core type the user (or CI) set.
#include "launch/blas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace trident::launch {

TEST(BlasCore, TheWidestKernelFamilyTheFeaturesAllow) {
  CpuFeatures f;
  f.listed = "AVX";
  EXPECT_EQ(blas_core_for(f).core, "");  // no AVX2 + FMA: OpenBLAS's own detection stands
  EXPECT_EQ(blas_core_for(f).why, "cpuid: AVX");
  f.avx2_fma = true;
  EXPECT_EQ(blas_core_for(f).core, "Haswell");
  f.avx512 = true;
  EXPECT_EQ(blas_core_for(f).core, "SkylakeX");
}

TEST(BlasCore, ThisCpusChoiceIsSetOnlyWhenTheEnvironmentHasNone) {
  const char* saved = std::getenv("OPENBLAS_CORETYPE");
  const std::string before = saved ? saved : "";
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  choose_blas_core();
  EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Prescott");  // the user's value stands
  EXPECT_EQ(blas_core_note("Prescott"), "Prescott (OPENBLAS_CORETYPE=Prescott from the environment)");

  unsetenv("OPENBLAS_CORETYPE");
  choose_blas_core();
  const BlasCoreChoice c = blas_core_for(cpu_features());
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(set ? std::string(set) : "", c.core);
  if (!c.core.empty())
    EXPECT_EQ(blas_core_note(c.core), c.core + " (OPENBLAS_CORETYPE=" + c.core + " set by trident from " + c.why + ")");
  if (saved) setenv("OPENBLAS_CORETYPE", before.c_str(), 1);
  else unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace trident::launch
