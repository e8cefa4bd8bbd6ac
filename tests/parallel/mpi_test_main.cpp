// GoogleTest main for tests that run on several MPI ranks (ctest launches them with mpirun).
// Every rank runs every test; only rank 0 prints the listing, every rank prints its failures,
// and the process exits non-zero when any rank failed, so mpirun's exit code tells ctest.
#include <gtest/gtest.h>
#include <mpi.h>

namespace {
class QuietOnOtherRanks : public testing::EmptyTestEventListener {};
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    // Keep failures visible on every rank; drop the progress lines of ranks above 0.
    delete listeners.Release(listeners.default_result_printer());
    struct FailurePrinter : testing::EmptyTestEventListener {
      int rank;
      explicit FailurePrinter(int r) : rank(r) {}
      void OnTestPartResult(const testing::TestPartResult& r) override {
        if (r.failed())
          std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank, r.file_name() ? r.file_name() : "?",
                       r.line_number(), r.summary());
      }
    };
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
