// SplitBalancer on planted traces: the arithmetic of --split auto without timing luck
// (auto_split_test.cc runs it end to end on a slowed device).

#include "runtime/split_balancer.h"

#include "gtest/gtest.h"

namespace tandem::runtime {
namespace {

// One step's trace: each device busy for `ns[d]` on its compute stream, plus a comm-stream
// entry that must not count (comm streams wait for each other by design).
std::vector<TraceEntry> stepTrace(const std::vector<int64_t>& ns) {
  std::vector<TraceEntry> trace;
  for (size_t d = 0; d < ns.size(); ++d) {
    trace.push_back({nullptr, d, false, 1000, 1000 + ns[d]});
    trace.push_back({nullptr, d, true, 0, 1'000'000'000});
  }
  return trace;
}

SplitBalancer::Options opts() { return {.warmup_steps = 1, .measure_steps = 2, .threshold = 1.1}; }

TEST(SplitBalancer, ProposesWeightsInProportionToImagesPerBusySecond) {
  SplitBalancer b(2, opts());
  const std::vector<int64_t> rows = {32, 32};
  EXPECT_FALSE(b.wantsTrace());  // warm-up step
  EXPECT_FALSE(b.afterStep({}, rows).has_value());
  ASSERT_TRUE(b.wantsTrace());
  EXPECT_FALSE(b.afterStep(stepTrace({1'000'000, 4'000'000}), rows).has_value());
  ASSERT_TRUE(b.wantsTrace());
  auto plan = b.afterStep(stepTrace({1'000'000, 4'000'000}), rows);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_DOUBLE_EQ((*plan)[0], 1.0);   // the fastest device is the unit
  EXPECT_DOUBLE_EQ((*plan)[1], 0.25);  // four times as slow per image
  EXPECT_DOUBLE_EQ(b.lastCriticalPathNs(), 4'000'000);
  EXPECT_FALSE(b.settled());
  EXPECT_FALSE(b.wantsTrace());  // a new plan starts with a warm-up again
}

TEST(SplitBalancer, UnevenRowsAreTakenIntoAccount) {
  // Per step, 48 rows in 2 ms on device 0 and 16 rows in 3 ms (mean of 2 and 4) on device
  // 1: 24 and 16/3 images per ms, so device 1 gets 2/9 of device 0's share.
  SplitBalancer b(2, opts());
  const std::vector<int64_t> rows = {48, 16};
  b.afterStep({}, rows);
  b.afterStep(stepTrace({2'000'000, 2'000'000}), rows);
  auto plan = b.afterStep(stepTrace({2'000'000, 4'000'000}), rows);
  ASSERT_TRUE(plan.has_value());
  EXPECT_DOUBLE_EQ((*plan)[0], 1.0);
  EXPECT_DOUBLE_EQ((*plan)[1], 2.0 / 9.0);
  EXPECT_DOUBLE_EQ(b.lastCriticalPathNs(), 3'000'000);
}

TEST(SplitBalancer, SettlesWithinTheThresholdAndStopsMeasuring) {
  SplitBalancer b(2, opts());
  const std::vector<int64_t> rows = {32, 32};
  b.afterStep({}, rows);
  b.afterStep(stepTrace({1'000'000, 1'050'000}), rows);
  EXPECT_FALSE(b.afterStep(stepTrace({1'000'000, 1'050'000}), rows).has_value());
  EXPECT_TRUE(b.settled());
  EXPECT_FALSE(b.wantsTrace());
  EXPECT_FALSE(b.afterStep(stepTrace({1'000'000, 9'000'000}), rows).has_value());
}

TEST(SplitBalancer, NoPlanWhenADeviceMeasuredNothing) {
  // A device with no busy time gives no speed to compare: no plan from that window.
  SplitBalancer b(2, opts());
  const std::vector<int64_t> rows = {64, 0};
  b.afterStep({}, rows);
  b.afterStep(stepTrace({2'000'000, 0}), rows);
  auto plan = b.afterStep(stepTrace({2'000'000, 0}), rows);
  EXPECT_FALSE(plan.has_value());  // the least busy device measured 0: nothing to compare
}

}  // namespace
}  // namespace tandem::runtime
