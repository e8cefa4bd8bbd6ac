// Which ranks a failed launch lost, from what mpirun, srun and the ranks printed (elastic_failure.h).
#include <gtest/gtest.h>

#include "runtime/parallel/elastic_failure.h"

using namespace trident::parallel;

TEST(ElasticFailure, MpirunNamesTheRankThatDied) {
  const std::string said =
      "Primary job  terminated normally, but 1 process returned\n"
      "mpirun noticed that process rank 5 with PID 0 on node vm exited on signal 9 (Killed).\n"
      "trident train: rank 4 (host vm, pid 12) failed: communication timeout: rank 4 waited 300 s at step 3 on "
      "tp[0/2] all_reduce 64 f32 from rank 5\n";
  const LostRanks r = lost_ranks_from_output(said);
  EXPECT_EQ(r.ranks, std::vector<int>({5}));
  EXPECT_NE(r.evidence.find("mpirun noticed"), std::string::npos);
}

TEST(ElasticFailure, SrunNamesTasksKilled) {
  const LostRanks r = lost_ranks_from_output("srun: error: gpu7: task 3: Killed\nsrun: error: gpu7: task 2: Killed\n"
                                             "srun: error: gpu1: task 0: Exited with exit code 1\n");
  EXPECT_EQ(r.ranks, std::vector<int>({2, 3}));
}

TEST(ElasticFailure, AHungRankIsThePeerItsNeighboursWaitedOn) {
  const LostRanks r = lost_ranks_from_output(
      "trident train: rank 0 (host vm, pid 1) failed: communication timeout: rank 0 waited 20 s at step 3 on pp[0/2] "
      "recv 512 f32 from rank 1\n");
  EXPECT_EQ(r.ranks, std::vector<int>({1}));
}

TEST(ElasticFailure, AnEvictedStragglerIsLost) {
  const LostRanks r = lost_ranks_from_output(
      "trident train: evicting straggler rank 3: rank 3 (stage 1) is a straggler from step 9: ...\n");
  EXPECT_EQ(r.ranks, std::vector<int>({3}));
}

TEST(ElasticFailure, TridentsOwnErrorsLoseNoRank) {
  EXPECT_TRUE(lost_ranks_from_output("trident train: error: cannot write the metrics file 'm.jsonl'\n").ranks.empty());
  EXPECT_TRUE(lost_ranks_from_output("").ranks.empty());
}

TEST(ElasticFailure, NodesOfRanks) {
  EXPECT_EQ(nodes_of_ranks({5}, 2), std::vector<int64_t>({2}));
  EXPECT_EQ(nodes_of_ranks({0, 1, 7}, 4), std::vector<int64_t>({0, 1}));
  EXPECT_EQ(nodes_of_ranks({3}, 1), std::vector<int64_t>({3}));
}
