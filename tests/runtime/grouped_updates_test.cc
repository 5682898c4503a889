// group-updates changes how many kernels step the parameters, not what they compute:
// training with sgd_update_group (adamw_update_group) nodes ends with the same variables,
// moments and update counts included, bit for bit, as training with one sgd_update
// (adamw_update) per parameter (the CPU group kernels run the same loops; the CUDA ones the
// same per-element steps, tests/cuda/optimizer_kernels_test.cc).

#include <string>

#include "gtest/gtest.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

size_t countOp(runtime::Trainer& t, ir::Op op) {
  size_t n = 0;
  for (const auto& node : t.executor().module().graph(ir::kTrainGraph)->nodes())
    n += node->op() == op;
  return n;
}

ir::Op groupOp(const TrainSetup& o) {
  return o.optimizer == "adamw" ? ir::Op::kAdamwUpdateGroup : ir::Op::kSgdUpdateGroup;
}

void expectGroupedEqualsUngrouped(const std::string& model, TrainSetup o) {
  auto batches = randomBatches(3, o.batch, 21);
  o.group_updates = true;
  auto grouped = trainOn(model, o, batches);
  o.group_updates = false;
  auto single = trainOn(model, o, batches);
  ASSERT_TRUE(grouped && single);
  EXPECT_GT(countOp(*grouped, groupOp(o)), 0u);
  EXPECT_EQ(countOp(*single, groupOp(o)), 0u);
  EXPECT_TRUE(snapshot(*grouped) == snapshot(*single));
}

// Momentum and weight decay (three operand streams), several buckets on two devices.
TEST(GroupedUpdates, Resnet18WithMomentumOnTwoDevicesChangesNoBit) {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 8;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  o.bucket_mb = 4;
  o.seed = 3;
  expectGroupedEqualsUngrouped("resnet18", o);
}

// Gradients reduced in bf16: the group reads bf16 sums.
TEST(GroupedUpdates, LenetWithBf16AllReduceChangesNoBit) {
  TrainSetup o;
  o.devices = cpus(3);
  o.batch = 12;
  o.bf16_allreduce = true;
  o.bucket_mb = 0.05;
  o.first_bucket_mb = 0.001;
  expectGroupedEqualsUngrouped("lenet", o);
}

// AdamW (five operand streams: weights, gradients, both moments, the update counts) under
// a schedule's lr_scale, several buckets on two devices.
TEST(GroupedUpdates, LenetWithAdamwAndScheduleOnTwoDevicesChangesNoBit) {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 8;
  o.optimizer = "adamw";
  o.lr = 1e-3;
  o.weight_decay = 0.05;
  o.lr_schedule = true;
  o.bucket_mb = 0.05;
  o.first_bucket_mb = 0.001;
  o.seed = 5;
  expectGroupedEqualsUngrouped("lenet", o);
}

// AdamW on bf16 gradients (mixed precision): the group reads bf16, steps f32 masters.
TEST(GroupedUpdates, LenetWithAdamwInBf16ChangesNoBit) {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 8;
  o.optimizer = "adamw";
  o.lr = 1e-3;
  o.bf16 = true;
  o.bf16_allreduce = true;
  expectGroupedEqualsUngrouped("lenet", o);
}

// One device: no all_reduce, one group of every parameter.
TEST(GroupedUpdates, LenetOnOneDeviceIsOneGroup) {
  TrainSetup o;
  o.batch = 8;
  o.momentum = 0.5;
  auto batches = randomBatches(2, o.batch, 4);
  o.group_updates = true;
  auto grouped = trainOn("lenet", o, batches);
  ASSERT_TRUE(grouped);
  EXPECT_EQ(countOp(*grouped, ir::Op::kSgdUpdateGroup), 1u);
  EXPECT_EQ(countOp(*grouped, ir::Op::kSgdUpdate), 0u);
  o.group_updates = false;
  auto single = trainOn("lenet", o, batches);
  ASSERT_TRUE(single);
  EXPECT_TRUE(snapshot(*grouped) == snapshot(*single));
}

}  // namespace
}  // namespace tandem::testing
