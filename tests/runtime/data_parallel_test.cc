// k devices with global batch B must give the parameters one device gets with batch B:
// the batch split, the all_reduce and the loss divisor together compute the same SGD step.

#include <cstring>

#include "gtest/gtest.h"
#include "ir/placement.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

TrainSetup lenetOptions(int devices, std::vector<double> weights = {}) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.weights = std::move(weights);
  o.batch = 96;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  o.seed = 7;
  return o;
}

TEST(DataParallel, OneTwoAndThreeDevicesEndWithTheSameParameters) {
  auto batches = randomBatches(5, 96, 1);
  auto one = trainOn("lenet", lenetOptions(1), batches);
  auto two = trainOn("lenet", lenetOptions(2), batches);
  auto three = trainOn("lenet", lenetOptions(3, {3, 2, 1}), batches);  // 48 + 32 + 16
  auto split31 = trainOn("lenet", lenetOptions(2, {3, 1}), batches);    // --split 3,1: 72 + 24
  ASSERT_TRUE(one && two && three && split31);
  Snapshot ref = snapshot(*one), s2 = snapshot(*two), s3 = snapshot(*three),
           s31 = snapshot(*split31);
  for (const auto& [name, replicas] : ref) {
    for (const Snapshot* s : {&s2, &s3, &s31})
      for (const auto& replica : s->at(name))
        EXPECT_LE(relativeDifference(replica, replicas[0]), 1e-5) << name;
    // The parameters did move: the comparison is not between untouched initial values.
    EXPECT_GT(relativeDifference(replicas[0], std::vector<float>(replicas[0].size(), 0.f)), 0);
  }
}

TEST(DataParallel, ReplicasStayBitIdentical) {
  auto batches = randomBatches(3, 96, 2);
  auto three = trainOn("lenet", lenetOptions(3, {3, 2, 1}), batches);
  ASSERT_TRUE(three);
  for (const auto& [name, replicas] : snapshot(*three))
    for (size_t d = 1; d < replicas.size(); ++d)
      EXPECT_EQ(std::memcmp(replicas[d].data(), replicas[0].data(), replicas[0].size() * 4), 0)
          << name << " on device " << d;
}

TEST(DataParallel, SameSeedGivesBitIdenticalRuns) {
  auto batches = randomBatches(5, 96, 3);
  auto a = trainOn("lenet", lenetOptions(2), batches);
  auto b = trainOn("lenet", lenetOptions(2), batches);
  ASSERT_TRUE(a && b);
  Snapshot sa = snapshot(*a), sb = snapshot(*b);
  for (const auto& [name, replicas] : sa)
    EXPECT_EQ(std::memcmp(replicas[0].data(), sb[name][0].data(), replicas[0].size() * 4), 0)
        << name;
}

// Reducing within groups, across the groups' first devices and back (insert-collectives
// {groups=G}) adds in the local communicator's tree order, as the flat all_reduce does:
// every parameter on every device ends bit for bit where the flat run puts it.
void expectHierarchicalEqualsFlat(int devices, int64_t groups) {
  auto batches = randomBatches(4, 96, 5);
  auto flat = trainOn("lenet", lenetOptions(devices), batches);
  auto o = lenetOptions(devices);
  o.allreduce_groups = groups;
  o.bucket_mb = 0.2;  // several buckets, each reduced in three steps
  auto hier = trainOn("lenet", o, batches);
  ASSERT_TRUE(flat && hier);
  const ir::Graph& g = *hier->executor().module().graph(ir::kTrainGraph);
  int grouped = 0;
  for (const auto& n : g.nodes()) grouped += ir::numGroups(*n) == groups ? 1 : 0;
  EXPECT_GE(grouped, 2) << "no grouped collectives in the hierarchical step";
  Snapshot sf = snapshot(*flat), sh = snapshot(*hier);
  for (const auto& [name, replicas] : sf)
    for (size_t d = 0; d < replicas.size(); ++d)
      EXPECT_EQ(std::memcmp(replicas[d].data(), sh[name][d].data(), replicas[d].size() * 4), 0)
          << name << " on device " << d;
}

TEST(DataParallel, HierarchicalAllReduceOnFourDevicesInTwoGroupsEqualsFlat) {
  expectHierarchicalEqualsFlat(4, 2);
}
TEST(DataParallel, HierarchicalAllReduceOnEightDevicesInFourGroupsEqualsFlat) {
  expectHierarchicalEqualsFlat(8, 4);
}

TEST(DataParallel, DifferentSeedsGiveDifferentInitialValues) {
  auto o = lenetOptions(2);
  auto a = trainOn("lenet", o, {});
  o.seed = 8;
  auto b = trainOn("lenet", o, {});
  ASSERT_TRUE(a && b);
  EXPECT_NE(snapshot(*a)["conv1.w"][0], snapshot(*b)["conv1.w"][0]);
}

}  // namespace
}  // namespace tandem::testing
