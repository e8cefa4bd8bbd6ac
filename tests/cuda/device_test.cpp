// Device selection: the local rank comes from the launcher; without a GPU, --device cuda is a
// clear InputError naming CUDA's reason and the fix; out-of-memory messages carry the numbers.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/problems.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/gpu_groups.h"

using namespace trident;
using namespace trident::cuda;

namespace {
void clear_rank_env() {
  for (const char* n : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) unsetenv(n);
}
}  // namespace

TEST(LocalRank, read_from_the_launchers_environment) {
  clear_rank_env();
  EXPECT_EQ(local_rank_from_env(), 0);
  setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(local_rank_from_env(), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);  // OpenMPI's wins: it is what mpirun sets
  EXPECT_EQ(local_rank_from_env(), 3);
  clear_rank_env();
}

TEST(SelectGpu, without_a_gpu_names_cudas_reason_and_the_fix) {
  std::string why;
  if (gpu_count(&why) > 0) GTEST_SKIP() << "a GPU is present; this test is for machines without one";
  EXPECT_FALSE(why.empty());
  try {
    select_gpu(0);
    FAIL() << "select_gpu succeeded without a GPU";
  } catch (const InputError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    const Problem& p = e.problems()[0];
    EXPECT_EQ(p.code, "no-gpu");
    EXPECT_NE(p.what.find("--device cuda"), std::string::npos) << p.what;
    EXPECT_NE(p.what.find(why), std::string::npos) << p.what;  // CUDA's own reason
    EXPECT_NE(p.fix.find("--device cpu"), std::string::npos) << p.fix;
  }
}

TEST(MakeCudaKernels, without_a_gpu_is_an_input_error_not_a_crash) {
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(make_cuda_kernels(), InputError);
}

TEST(GpuComm, names_parse_and_an_unknown_one_is_refused_with_the_choices) {
  EXPECT_EQ(parse_gpu_comm("nccl"), GpuComm::Nccl);
  EXPECT_EQ(parse_gpu_comm("mpi-host"), GpuComm::MpiHost);
  EXPECT_STREQ(gpu_comm_name(GpuComm::MpiHost), "mpi-host");
  try {
    parse_gpu_comm("gloo");
    FAIL() << "accepted --gpu-comm gloo";
  } catch (const InputError& e) {
    EXPECT_NE(e.problems()[0].what.find("'gloo'"), std::string::npos);
    EXPECT_NE(e.problems()[0].fix.find("mpi-host"), std::string::npos);
  }
}

TEST(SelectGpuForRank, without_a_gpu_is_the_no_gpu_error_even_when_sharing) {
  if (gpu_count() > 0) GTEST_SKIP() << "a GPU is present";
  for (bool share : {false, true}) {
    try {
      select_gpu_for_rank(1, 4, share);
      FAIL() << "selected a GPU on a machine without one";
    } catch (const InputError& e) {
      EXPECT_EQ(e.problems()[0].code, "no-gpu");
    }
  }
}
