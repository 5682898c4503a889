// The event replay on hand-made schedules whose timelines are worked out by hand.

#include "sim/event_sim.h"

#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

// Backward makes grad1 then grad2; each bucket is reduced as soon as its gradient exists;
// the update waits for both reductions.
//   compute: fwd 0-2, grad1 2-3, grad2 3-5, update 7-8
//   comm:                 reduce1 3-6, reduce2 6-7
TEST(EventSim, BucketsOverlapBackward) {
  std::vector<SimOp> ops = {
      {"fwd", false, 2, {}},   {"grad1", false, 1, {}},   {"reduce1", true, 3, {1}},
      {"grad2", false, 2, {}}, {"reduce2", true, 1, {3}}, {"update", false, 1, {2, 4}},
  };
  SimResult r = simulateStreams(ops);
  EXPECT_DOUBLE_EQ(r.start_s[2], 3);
  EXPECT_DOUBLE_EQ(r.start_s[3], 3);  // grad2 runs while reduce1 does
  EXPECT_DOUBLE_EQ(r.start_s[4], 6);  // reduce2 waits for the comm stream, not for grad2
  EXPECT_DOUBLE_EQ(r.start_s[5], 7);
  EXPECT_DOUBLE_EQ(r.step_s, 8);
  EXPECT_DOUBLE_EQ(r.compute_s, 6);
  EXPECT_DOUBLE_EQ(r.comm_s, 4);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 2);
}

// The same work with one bucket after backward: nothing overlaps.
//   compute: fwd 0-2, grad1 2-3, grad2 3-5, update 9-10;  comm: reduce 5-9
TEST(EventSim, OneBucketAfterBackwardExposesAllCommunication) {
  std::vector<SimOp> ops = {
      {"fwd", false, 2, {}},    {"grad1", false, 1, {}},   {"grad2", false, 2, {}},
      {"reduce", true, 4, {2}}, {"update", false, 1, {3}},
  };
  SimResult r = simulateStreams(ops);
  EXPECT_DOUBLE_EQ(r.step_s, 10);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 4);
}

TEST(EventSim, AStreamRunsItsWorkInIssueOrder) {
  // The second compute op waits on nothing but still follows the first.
  SimResult r = simulateStreams({{"a", false, 5, {}}, {"b", false, 1, {}}, {"c", true, 1, {}}});
  EXPECT_DOUBLE_EQ(r.start_s[1], 5);
  EXPECT_DOUBLE_EQ(r.start_s[2], 0);  // the comm stream is free from the start
  EXPECT_DOUBLE_EQ(r.step_s, 6);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 0);
}

}  // namespace
}  // namespace tandem::sim
