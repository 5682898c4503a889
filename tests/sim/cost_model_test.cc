// The alpha-beta all_reduce, reduce_scatter and all_gather costs on numbers worked out by
// hand.

#include "sim/cost_model.h"

#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

// 8 per node; inside 100 GB/s and 1 us a step, between nodes 10 GB/s and 10 us.
Topology topology() {
  return {
      .gpus_per_node = 8, .intra = {"intra", 1e-6, 100e9, ""}, .inter = {"inter", 10e-6, 10e9, ""}};
}

TEST(CostModel, RingWithinANodeIsTheTextbookFormula) {
  // 2 (p-1)/p * S / B + 2 (p-1) alpha = 2*7/8 * 100e6 / 100e9 + 14 * 1e-6.
  EXPECT_NEAR(ringAllReduceSeconds(100e6, 8, topology()), 1.75e-3 + 14e-6, 1e-12);
}

TEST(CostModel, RingAcrossNodesIsBoundByTheSlowerLink) {
  // 16 devices leave the node: 2*15/16 * 100e6 / 10e9 + 30 * 10e-6.
  EXPECT_NEAR(ringAllReduceSeconds(100e6, 16, topology()), 18.75e-3 + 300e-6, 1e-12);
}

TEST(CostModel, TreeLatencyGrowsWithTheLogOfTheNodes) {
  // 1024 devices = 128 nodes: 2 (7 * 1us + log2(128) * 10us) + 2 * S / 10 GB/s.
  EXPECT_NEAR(treeAllReduceSeconds(1e3, 1024, topology()), 2 * (7e-6 + 70e-6) + 2e3 / 10e9, 1e-12);
  // Twice the nodes, one step deeper.
  EXPECT_NEAR(
      treeAllReduceSeconds(1e3, 2048, topology()) - treeAllReduceSeconds(1e3, 1024, topology()),
      2 * 10e-6, 1e-12);
}

TEST(CostModel, PicksTreeForSmallMessagesAtScaleAndRingForLargeOnes) {
  CollectiveCost small = allReduceCost(1e3, 1024, topology());
  EXPECT_EQ(small.algorithm, "tree");
  EXPECT_DOUBLE_EQ(small.seconds, small.tree_s);
  EXPECT_LT(small.tree_s, small.ring_s);
  CollectiveCost large = allReduceCost(1e9, 16, topology());
  EXPECT_EQ(large.algorithm, "ring");
  EXPECT_DOUBLE_EQ(large.seconds, large.ring_s);
}

TEST(CostModel, OneDeviceReducesNothing) {
  CollectiveCost c = allReduceCost(1e9, 1, topology());
  EXPECT_EQ(c.seconds, 0);
  EXPECT_EQ(c.algorithm, "none");
}

TEST(CostModel, RingReduceScatterIsHalfTheRingAllReduce) {
  // (p-1)/p * S / B + (p-1) alpha = 7/8 * 100e6 / 100e9 + 7 * 1e-6.
  EXPECT_NEAR(ringReduceScatterSeconds(100e6, 8, topology()), 0.875e-3 + 7e-6, 1e-12);
  // Across nodes, bound by the slower link: 15/16 * 100e6 / 10e9 + 15 * 10e-6.
  EXPECT_NEAR(ringReduceScatterSeconds(100e6, 16, topology()), 9.375e-3 + 150e-6, 1e-12);
}

TEST(CostModel, TreeReduceScatterIsTheTreesReduceHalf) {
  // 1024 devices: 7 * 1us + log2(128) * 10us + S / 10 GB/s.
  EXPECT_NEAR(treeReduceScatterSeconds(1e3, 1024, topology()), 7e-6 + 70e-6 + 1e3 / 10e9, 1e-12);
}

// reduce_scatter then all_gather (each costed by reduceScatterCost) is an all_reduce, and
// the tuner picks as it does for the all_reduce.
TEST(CostModel, ReduceScatterAndAllGatherAddUpToAnAllReduce) {
  for (int64_t p : {2, 8, 16, 1024})
    for (double bytes : {1e3, 1e6, 1e9}) {
      const CollectiveCost half = reduceScatterCost(bytes, p, topology());
      const CollectiveCost whole = allReduceCost(bytes, p, topology());
      EXPECT_NEAR(2 * half.seconds, whole.seconds, 1e-12 * (1 + whole.seconds))
          << p << ", " << bytes;
      EXPECT_EQ(half.algorithm, whole.algorithm) << p << ", " << bytes;
    }
  EXPECT_EQ(reduceScatterCost(1e9, 1, topology()).algorithm, "none");
}

}  // namespace
}  // namespace tandem::sim
