// splitBatch (even, uneven and weighted slices) and the replicate pass: one copy of each
// node per device, per-device batch slices, and its errors.

#include "passes/replicate.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using passes::splitBatch;
using ::testing::ElementsAre;

std::vector<int64_t> split(int64_t batch, size_t devices, std::vector<double> weights = {}) {
  auto s = splitBatch(batch, devices, weights);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<int64_t>{};
}

TEST(SplitBatch, EvenWithRemainderToTheFirstDevices) {
  EXPECT_THAT(split(256, 1), ElementsAre(256));
  EXPECT_THAT(split(256, 2), ElementsAre(128, 128));
  EXPECT_THAT(split(256, 3), ElementsAre(86, 85, 85));
  EXPECT_THAT(split(10, 4), ElementsAre(3, 3, 2, 2));
  EXPECT_THAT(split(3, 3), ElementsAre(1, 1, 1));
  EXPECT_THAT(split(512, 8), ElementsAre(64, 64, 64, 64, 64, 64, 64, 64));
}

TEST(SplitBatch, ProportionalToWeights) {
  EXPECT_THAT(split(256, 2, {3, 1}), ElementsAre(192, 64));
  EXPECT_THAT(split(256, 2, {1, 1}), ElementsAre(128, 128));
  EXPECT_THAT(split(256, 3, {1, 2, 1}), ElementsAre(64, 128, 64));
  // Everyone gets a sample, however small its weight.
  EXPECT_THAT(split(4, 4, {1, 1, 1, 1000}), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(split(10, 2, {1e-9, 1}), ElementsAre(1, 9));
  // Ties in the remainder go to the first device.
  EXPECT_THAT(split(5, 2, {1, 1}), ElementsAre(3, 2));
}

TEST(SplitBatch, BatchSmallerThanDevicesIsAnError) {
  auto s = splitBatch(2, 3, {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "batch 2 is smaller than the device count 3: every device needs at least one sample");
  EXPECT_EQ(splitBatch(0, 1, {}).status().message(),
            "batch 0 is smaller than the device count 1: every device needs at least one sample");
  // Weights do not change that.
  EXPECT_EQ(splitBatch(1, 2, {1, 1}).status().message(),
            "batch 1 is smaller than the device count 2: every device needs at least one sample");
}

TEST(SplitBatch, BadWeightsAreErrors) {
  EXPECT_EQ(splitBatch(256, 2, {1, 2, 3}).status().message(),
            "weights has 3 entries for 2 devices");
  EXPECT_EQ(splitBatch(256, 2, {1, 0}).status().message(), "weights must all be > 0");
  EXPECT_EQ(splitBatch(256, 2, {-1, 2}).status().message(), "weights must all be > 0");
  EXPECT_EQ(splitBatch(256, 2, {NAN, 2}).status().message(), "weights must all be > 0");
}

// Weights whose sum overflows a double: the shares must still add up to the batch.
TEST(SplitBatch, HugeWeightsDoNotOverflow) {
  EXPECT_THAT(split(256, 2, {1e308, 1e308}), ElementsAre(128, 128));
  // Same proportions as 10:1.
  EXPECT_THAT(split(256, 2, {1e308, 1e307}), ElementsAre(232, 24));
  EXPECT_THAT(split(256, 2, {10, 1}), ElementsAre(232, 24));
}

// An infinite weight is not a proportion: the pass options and splitBatch reject it.
TEST(SplitBatch, InfiniteWeightsAreRejected) {
  EXPECT_EQ(passes::parsePipeline("replicate{devices=2,weights=[inf,1]}").status().message(),
            "pass replicate: option 'weights' must all be finite and > 0");
  EXPECT_EQ(splitBatch(256, 2, {INFINITY, 1}).status().message(), "weights must all be finite");
}

// Over many batches, device counts and random weights: the slices cover the batch, give
// every device at least one sample and stay within one sample of the exact share.
TEST(SplitBatch, SlicesAlwaysAddUp) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> weight(0.01, 10);
  for (int64_t batch = 1; batch <= 300; ++batch) {
    for (size_t devices = 1; devices <= 9 && static_cast<int64_t>(devices) <= batch; ++devices) {
      std::vector<double> weights;
      double total = 0;
      for (size_t d = 0; d < devices; ++d) total += weights.emplace_back(weight(rng));
      for (bool weighted : {false, true}) {
        auto s = splitBatch(batch, devices, weighted ? weights : std::vector<double>{});
        ASSERT_TRUE(s.ok()) << s.status();
        ASSERT_EQ(s->size(), devices);
        int64_t sum = 0;
        for (size_t d = 0; d < devices; ++d) {
          int64_t got = (*s)[d];
          sum += got;
          EXPECT_GE(got, 1);
          double exact = weighted ? 1 + (batch - static_cast<double>(devices)) * weights[d] / total
                                  : static_cast<double>(batch) / devices;
          EXPECT_LT(std::abs(got - exact), 1.0)
              << "batch " << batch << " device " << d << " of " << devices;
        }
        EXPECT_EQ(sum, batch) << "batch " << batch << " on " << devices;
      }
    }
  }
}

TEST(Replicate, OneCopyOfEachNodePerDevice) {
  auto m = buildZooModel("lenet", 256);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff").ok());
  std::vector<size_t> before;
  for (const auto& g : m->graphs()) before.push_back(g->numNodes());
  ASSERT_TRUE(runPipeline(*m, "replicate{devices=[cpu:0,cuda:1,cuda:0]}").ok());
  std::vector<ir::Device> devices{{::tandem::testing::kind("cpu"), 0},
                                  {::tandem::testing::kind("cuda"), 1},
                                  {::tandem::testing::kind("cuda"), 0}};
  EXPECT_EQ(m->devices(), devices);
  for (size_t i = 0; i < m->graphs().size(); ++i) {
    const ir::Graph& g = *m->graphs()[i];
    EXPECT_EQ(g.numNodes(), 3 * before[i]) << "@" << g.name();
    std::vector<int> per_device(3, 0);
    for (const auto& n : g.nodes()) {
      int d = deviceNumber(*m, n->device());
      ASSERT_GE(d, 0) << n->describe();
      ++per_device[d];
      EXPECT_FALSE(n->info().has(ir::kCollective)) << "replicate adds no communication";
    }
    EXPECT_THAT(per_device, ElementsAre(before[i], before[i], before[i])) << "@" << g.name();
  }
  // Per-device inputs carry the device's slice (node-major: each input's replicas side
  // by side); outputs are device-major.
  const ir::Graph& train = *m->graph(ir::kTrainGraph);
  std::vector<ir::Node*> inputs = train.inputs();
  ASSERT_EQ(inputs.size(), 6u);
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  for (const ir::Node* in : inputs) {
    sizes.push_back(in->result()->type().shape[0]);
    names.push_back(in->result()->name());
  }
  EXPECT_THAT(sizes, ElementsAre(86, 85, 85, 86, 85, 85));
  EXPECT_THAT(names, ElementsAre("x.0", "x.1", "x.2", "y.0", "y.1", "y.2"));
  ASSERT_EQ(train.outputs().size(), 6u);
  std::vector<std::string> outs;
  for (const ir::Value* v : train.outputs()) outs.push_back(v->name());
  EXPECT_THAT(outs,
              ElementsAre("loss.0", "correct.0", "loss.1", "correct.1", "loss.2", "correct.2"));
  for (const ir::Node* l : nodesWithOp(train, ir::Op::kSoftmaxCrossEntropy))
    EXPECT_EQ(l->intAttr("divisor"), 256) << "the global batch, not the slice";
}

TEST(Replicate, Errors) {
  auto m = buildZooModel("lenet", 2);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(runPipeline(*m, "replicate{devices=3}").message(),
            "replicate @train_step: batch 2 is smaller than the device count 3: every device "
            "needs at least one sample");
  auto ok = buildZooModel("lenet", 4);
  ASSERT_NE(ok, nullptr);
  ASSERT_TRUE(runPipeline(*ok, "replicate{devices=2}").ok());
  EXPECT_EQ(runPipeline(*ok, "replicate{devices=2}").message(),
            "replicate: the module is already replicated on [cpu:0, cpu:1]");
}

TEST(Replicate, InputsMustAgreeOnTheBatch) {
  auto m = ir::parseModule(R"(module @bad {
graph @eval_step(%x: f32[6,8], %y: i32[5]) {
  return
}
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(runPipeline(**m, "replicate{devices=2}").message(),
            "replicate: inputs %x and %y of @eval_step disagree on the batch size (6 vs 5)");
}

// A sample-indexed op (dropout) must see the batch on axis 0: with the samples on axis 1,
// a device's rows are not rows of the whole batch's tensor, and no offset could name them.
TEST(Replicate, SampleIndexedOpWithoutTheBatchOnAxisZeroIsAnErrorNamingIt) {
  auto m = ir::parseModule(R"(module @bad {
var @step : i32[1] {role=fed, init=zeros}
graph @train_step(%x: f32[6,8]) {
  %t = transpose(%x) {perm=[1,0]} : f32[8,6]
  %step = param() {var=@step} : i32[1]
  %drop = dropout(%t, %step) {p=0.5, mask_id=0} : f32[8,6]
  return %drop
}
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(runPipeline(**m, "replicate{devices=2}").message(),
            "replicate @train_step on cpu:1: %drop.1 (dropout @cpu:1): its operand is f32[8,3] "
            "here and f32[8,6] for the whole batch of 6; a sample-indexed op needs the batch on "
            "axis 0 (rows in proportion to the device's share) to compute the rows one device "
            "would");
}

}  // namespace
}  // namespace tandem::testing
