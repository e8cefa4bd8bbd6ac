// When OpenMP's threads must wait passively: ranks x threads, with the machine's other load,
// above the cores; never for one thread per rank (no team waits).
#include "launch/openmp_wait.h"

#include <gtest/gtest.h>

namespace trident::launch {

TEST(OpenMpWait, PassiveOnlyWhenThreadsExceedTheCores) {
  EXPECT_FALSE(openmp_wait(1, 2, 0, 2).passive);  // 2 threads on 2 idle cores: spinning is fine
  EXPECT_FALSE(openmp_wait(2, 1, 0, 1).passive);  // one thread per rank: no team, nothing waits
  const WaitChoice over = openmp_wait(2, 2, 0, 2);
  EXPECT_TRUE(over.passive);
  EXPECT_EQ(over.why, "2 ranks x 2 threads > 2 cores");
  const WaitChoice busy = openmp_wait(1, 2, 7.9, 2);  // a busy machine: the others' load counts
  EXPECT_TRUE(busy.passive);
  EXPECT_EQ(busy.why, "1 rank x 2 threads + load 7.9 of other processes > 2 cores");
  EXPECT_FALSE(openmp_wait(1, 2, 1.5, 4).passive);
}

}  // namespace trident::launch
