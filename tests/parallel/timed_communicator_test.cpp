// TimedCommunicator's split of an all-to-all into the wire time and the wait for the peers:
// the time beyond latency + bytes x per byte is wait, none without a wire model.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/comm/self_communicator.h"
#include "runtime/parallel/timed_communicator.h"

namespace {

using trident::comm::DType;
using trident::comm::SelfCommunicator;
using trident::parallel::TimedCommunicator;

void one_all_to_all(TimedCommunicator& c, size_t floats) {
  std::vector<float> send(floats, 1.0f), recv(floats, 0.0f);
  const size_t counts[1] = {floats};
  c.all_to_all_v(send.data(), counts, recv.data(), counts, DType::F32);
  ASSERT_EQ(recv, send);
}

TEST(TimedCommunicator, an_all_to_all_without_a_wire_model_has_no_wait) {
  SelfCommunicator self("ep");
  TimedCommunicator c(self);
  one_all_to_all(c, 1 << 16);
  EXPECT_GT(c.seconds(), 0.0);
  EXPECT_EQ(c.wait_seconds(), 0.0);
}

TEST(TimedCommunicator, a_call_within_its_wire_time_waits_for_nothing) {
  SelfCommunicator self("ep");
  TimedCommunicator c(self);
  c.set_all_to_all_wire(1e3, 0.0);  // a latency no copy on this machine comes near
  one_all_to_all(c, 1 << 16);
  EXPECT_EQ(c.wait_seconds(), 0.0);
  c.set_all_to_all_wire(0.0, 1.0);  // a second per byte: the bytes alone exceed the call
  one_all_to_all(c, 1 << 16);
  EXPECT_EQ(c.wait_seconds(), 0.0);
}

TEST(TimedCommunicator, with_a_zero_wire_time_the_whole_call_is_wait_and_reset_clears_it) {
  SelfCommunicator self("ep");
  TimedCommunicator c(self);
  c.set_all_to_all_wire(0.0, 0.0);
  one_all_to_all(c, 1 << 16);
  EXPECT_GT(c.wait_seconds(), 0.0);
  EXPECT_EQ(c.wait_seconds(), c.seconds());
  c.reset();
  EXPECT_EQ(c.wait_seconds(), 0.0);
  EXPECT_EQ(c.seconds(), 0.0);
}

}  // namespace
