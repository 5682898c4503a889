// The replay of a real compiled step (LeNet on two devices): the schedule carries the
// executor's waits, the roofline counts a convolution's and a linear layer's work, and
// smaller buckets hide more communication, as they do in a real run.

#include "sim/step_replay.h"

#include <algorithm>

#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/placement.h"
#include "sim/cost_model.h"
#include "sim/roofline.h"
#include "train/compile.h"

namespace tandem::sim {
namespace {

std::unique_ptr<ir::Module> compileLenet(double bucket_mb, double first_bucket_mb) {
  auto spec = zoo::modelByName("lenet");
  EXPECT_TRUE(spec.ok());
  training::CompileOptions o = training::withModelDefaults(*spec);
  o.build.batch = 256;
  o.pipeline.devices = *ir::parseDeviceList("2");
  o.pipeline.bucket_mb = bucket_mb;
  o.pipeline.first_bucket_mb = first_bucket_mb;
  auto m = training::compileModel(*spec, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

const ir::Node* firstOf(const ir::Graph& g, ir::Op op) {
  for (const auto& n : g.nodes())
    if (n->op() == op) return n.get();
  return nullptr;
}

TEST(StepReplay, ScheduleHasDeviceZerosSharesWithTheExecutorsWaits) {
  auto m = compileLenet(25, 1);
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  std::vector<SimOp> ops = deviceSchedule(*m, g, 0, [](const ir::Node&) { return 1.0; });
  int all_reduces = 0, updates_waiting = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name.rfind("all_reduce", 0) == 0) {
      ASSERT_TRUE(ops[i].comm);
      // The first bucket waits for the compute stream that made its gradients; later ones
      // follow it on the comm stream's FIFO (streamWaits prunes what the FIFO covers).
      if (all_reduces++ == 0) {
        ASSERT_FALSE(ops[i].waits.empty()) << ops[i].name;
      }
      for (size_t w : ops[i].waits) EXPECT_FALSE(ops[w].comm);
    }
    if (!ops[i].comm && !ops[i].waits.empty()) ++updates_waiting;
    for (size_t w : ops[i].waits) EXPECT_LT(w, i);
  }
  EXPECT_EQ(all_reduces, 3);      // the gradients' bucket, the loss and the correct count
  EXPECT_GT(updates_waiting, 0);  // the updates wait for the reduced gradients
}

TEST(StepReplay, RooflineCountsConvolutionAndLinearWork) {
  auto m = compileLenet(25, 1);
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  // LeNet's first convolution (frontend/zoo/lenet.cc) on one device: 128 images, 20
  // channels of 26x26 from 1 channel through 3x3 filters, fused with its pool
  // (fuse-conv-relu-pool): the work counts the convolution's outputs, four a pooled one,
  // and its filter gradient as many products.
  const ir::Node* conv = firstOf(g, ir::Op::kConv2dReluAvgPool);
  ASSERT_NE(conv, nullptr);
  EXPECT_DOUBLE_EQ(nodeWork(*conv).flops, 2.0 * 128 * 20 * 26 * 26 * 1 * 3 * 3);
  const ir::Node* filter = firstOf(g, ir::Op::kConv2dReluAvgPoolBackwardFilter);
  ASSERT_NE(filter, nullptr);
  EXPECT_DOUBLE_EQ(nodeWork(*filter).flops, 2.0 * 128 * 20 * 26 * 26 * 1 * 3 * 3);
  // The second, unfused: 50 channels of 9x9 from 20 through 5x5 filters.
  const ir::Node* conv2 = firstOf(g, ir::Op::kConv2d);
  ASSERT_NE(conv2, nullptr);
  EXPECT_DOUBLE_EQ(nodeWork(*conv2).flops, 2.0 * 128 * 50 * 9 * 9 * 20 * 5 * 5);
  // Its first linear layer: 128 x 800 (50 channels of 4x4) -> 128.
  const ir::Node* fc = firstOf(g, ir::Op::kLinear);
  ASSERT_NE(fc, nullptr);
  EXPECT_DOUBLE_EQ(nodeWork(*fc).flops, 2.0 * 128 * 800 * 128);
  // Bytes: x, w, b read and y written, f32.
  EXPECT_DOUBLE_EQ(nodeWork(*fc).bytes, 4.0 * (128 * 800 + 128 * 800 + 128 + 128 * 128));
  GpuSpec gpu{.name = "test", .f32_flops = 1e12, .bf16_flops = 2e12, .mem_bytes_per_s = 1e9};
  EXPECT_DOUBLE_EQ(rooflineSeconds(nodeWork(*fc), gpu), nodeWork(*fc).bytes / 1e9);
}

// Compute 1 ms a node; an all_reduce costs its bytes over 1 GB/s.
double exposedComm(const ir::Module& m) {
  const ir::Graph& g = *m.graph(ir::kTrainGraph);
  return simulateStreams(deviceSchedule(m, g, 0,
                                        [](const ir::Node& n) {
                                          if (ir::streamOf(n) == ir::StreamKind::kCompute)
                                            return 1e-3;
                                          return n.op() == ir::Op::kAllReduce
                                                     ? collectiveBytesPerDevice(n) / 1e9
                                                     : 0.0;
                                        }))
      .exposed_comm_s;
}

TEST(StepReplay, SmallerBucketsHideMoreCommunication) {
  auto one_bucket = compileLenet(100, 100);
  auto small_buckets = compileLenet(0.05, 0.01);
  const double all = exposedComm(*one_bucket), some = exposedComm(*small_buckets);
  // One bucket after backward: its whole reduction (0.49 MiB at 1 GB/s) shows.
  EXPECT_GT(all, 0.49 * 1048576 / 1e9);
  EXPECT_LT(some, 0.8 * all);
}

}  // namespace
}  // namespace tandem::sim
