// Device selection: the local rank comes from the launcher; without a GPU, --device cuda is a
// clear InputError naming CUDA's reason and the fix; out-of-memory messages carry the numbers.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/problems.h"
#include "runtime/cuda/cuda_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/device_arena.h"

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

TEST(OutOfMemory, message_quotes_need_free_total_planner_and_largest_parts) {
  std::vector<ArenaRegion> regions{{"gradients (fp32)", 0, size_t(1) << 30}, {"logits", 0, size_t(3) << 29},
                                   {"tokens", 0, 4096}};
  const size_t GiB = size_t(1) << 30;
  std::string msg = out_of_memory_message(5 * GiB / 2, GiB, 80 * GiB, 1.5 * double(GiB), regions);
  EXPECT_NE(msg.find("needs 2.50 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.00 GiB free of 80.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("planner predicted 1.50 GiB"), std::string::npos) << msg;
  EXPECT_LT(msg.find("logits 1.50 GiB"), msg.find("gradients (fp32) 1.00 GiB")) << msg;  // largest first
  std::string no_plan = out_of_memory_message(GiB, 0, GiB, 0.0, regions);
  EXPECT_NE(no_plan.find("no planner prediction"), std::string::npos) << no_plan;
}
