// Several ranks of one job preparing the bundled corpus cache at the same moment (a fresh
// machine, `mpirun ... trident train` without --data) must each end with the same, complete
// token file: every writer uses its own temp name and renames atomically.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "runtime/data/corpus.h"
#include "runtime/data/token_file.h"

using namespace trident;
namespace fs = std::filesystem;

namespace {

TEST(BundledCorpus, ranks_preparing_the_cache_at_once_all_read_a_complete_file) {
  if (!fs::is_directory("/usr/share/games/fortunes")) GTEST_SKIP() << "fortunes not installed";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const fs::path dir = fs::current_path() / "bundled_corpus_race_cache";
  if (rank == 0) fs::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  setenv("TRIDENT_DATA_DIR", dir.c_str(), 1);
  for (int round = 0; round < 2; ++round) {  // 2nd round: the file exists, nobody rewrites it
    // Errors are caught, not thrown, so every rank still reaches the collectives below.
    std::string path, error;
    try {
      path = data::bundled_token_file(false);
    } catch (const std::exception& e) {
      error = e.what();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long long n = -1, lo = 0, hi = 0;
    try {
      data::TokenFile file(path);  // throws on a truncated file ("header promises ...")
      n = file.size();
    } catch (const std::exception& e) {
      error += e.what();
    }
    EXPECT_EQ(error, "") << "rank " << rank << " round " << round;
    MPI_Allreduce(&n, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&n, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_GT(lo, 100000) << "a rank read no or a short token file";
    EXPECT_EQ(lo, hi) << "ranks read different token counts";
    if (n > 0) EXPECT_EQ(fs::file_size(path), uintmax_t(data::kTokenHeaderBytes) + uintmax_t(n) * 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int leftovers = 0;
  for (auto& e : fs::directory_iterator(dir)) leftovers += e.path().filename() != "fortunes.tok";
  EXPECT_EQ(leftovers, 0) << "temp files left in " << dir;
}

}  // namespace
