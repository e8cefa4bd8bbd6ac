// TimedCommunicator records each all-to-all's entry and exit; all_to_all_wait_seconds splits a
// rank's calls into the collective's own time (last entry to last exit over the ranks) and the
// wait for its later peers.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "runtime/comm/self_communicator.h"
#include "runtime/measure/timed_communicator.h"

namespace {

using trident::comm::DType;
using trident::comm::SelfCommunicator;
using trident::measure::all_to_all_wait_seconds;
using trident::measure::TimedCommunicator;

void one_all_to_all(TimedCommunicator& c, size_t floats) {
  std::vector<float> send(floats, 1.0f), recv(floats, 0.0f);
  const size_t counts[1] = {floats};
  c.all_to_all_v(send.data(), counts, recv.data(), counts, DType::F32);
  ASSERT_EQ(recv, send);
}

TEST(TimedCommunicator, records_each_all_to_all_entry_and_exit_and_reset_clears_them) {
  SelfCommunicator self("ep");
  TimedCommunicator c(self);
  one_all_to_all(c, 1 << 16);
  one_all_to_all(c, 1 << 10);
  const std::vector<double>& s = c.all_to_all_spans();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_LE(s[0], s[1]);
  EXPECT_LE(s[1], s[2]);
  EXPECT_LE(s[2], s[3]);
  // Each span encloses its call's timed region (recorded just outside it, on the same clock), so
  // the spans add up to at least the timed seconds; how much more depends on preemption between
  // the two readings (over 100 us seen under the sanitizers on a loaded machine), so no upper bound.
  EXPECT_GT(c.seconds(), 0.0);
  EXPECT_LE(c.seconds(), (s[1] - s[0]) + (s[3] - s[2]) + 1e-9);
  c.reset();
  EXPECT_TRUE(c.all_to_all_spans().empty());
  EXPECT_EQ(c.seconds(), 0.0);
}

TEST(AllToAllWait, one_rank_alone_never_waits) {
  EXPECT_EQ(all_to_all_wait_seconds({1.0, 3.0, 5.0, 5.5}, 1, 0), 0.0);
}

// Rank 0 enters at 1, rank 1 at 4; both leave at 5 (rank 0 needed rank 1's rows): the
// collective took 1 s, rank 0 waited 3, rank 1 none. Per rank: entry, exit per call.
TEST(AllToAllWait, the_early_rank_waits_until_the_last_entry) {
  const std::vector<double> spans = {1.0, 5.0,   // rank 0
                                     4.0, 5.0};  // rank 1
  EXPECT_DOUBLE_EQ(all_to_all_wait_seconds(spans, 2, 0), 3.0);
  EXPECT_DOUBLE_EQ(all_to_all_wait_seconds(spans, 2, 1), 0.0);
}

// The late rank found its rows already sent (eager) and left at 4.2, before the early one (5):
// its short call is all collective time, not negative wait; the early rank's wait is its call
// beyond the collective's 1 s (4 - 1 = 3).
TEST(AllToAllWait, a_late_rank_leaving_first_has_no_wait_and_calls_add_up) {
  const std::vector<double> spans = {0.0, 1.0, 1.0, 5.0,   // rank 0: calls 1 and 2
                                     0.5, 1.0, 4.0, 4.2};  // rank 1
  // Call 1: last entry 0.5, last exit 1.0, own time 0.5: rank 0 waited 1.0 - 0.5.
  EXPECT_DOUBLE_EQ(all_to_all_wait_seconds(spans, 2, 0), 0.5 + 3.0);
  EXPECT_DOUBLE_EQ(all_to_all_wait_seconds(spans, 2, 1), 0.0);
}

TEST(AllToAllWait, ranks_with_different_calls_are_refused) {
  EXPECT_THROW(all_to_all_wait_seconds({1.0, 2.0, 3.0}, 2, 0), std::logic_error);
  EXPECT_THROW(all_to_all_wait_seconds({1.0, 2.0}, 2, 2), std::logic_error);
}

}  // namespace
