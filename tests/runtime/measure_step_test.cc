// Measured per-node costs on the CPU backend: every piece of device 0's work gets a time,
// and the simulator's replay of those times is a step no shorter than the compute
// stream's work.

#include "runtime/measure_step.h"

#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "ir/placement.h"
#include "sim/step_replay.h"
#include "train/compile.h"

namespace tandem::runtime {
namespace {

TEST(MeasureStep, EveryNodeOfDeviceZeroIsTimed) {
  auto spec = zoo::modelByName("lenet");
  ASSERT_TRUE(spec.ok());
  training::CompileOptions o = training::withModelDefaults(*spec);
  o.build.batch = 32;
  o.pipeline.devices = *ir::parseDeviceList("2");
  auto m = training::compileModel(*spec, o);
  ASSERT_TRUE(m.ok()) << m.status();
  auto measured = measureStep(std::move(*m), /*warmup=*/1, /*steps=*/2);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const ir::Module& module = measured->executor->module();
  const ir::Graph& g = *module.graph(ir::kTrainGraph);
  int timed = 0;
  for (const auto& n : g.nodes()) {
    if (n->op() == ir::Op::kConv2d || n->op() == ir::Op::kConv2dReluAvgPool ||
        n->op() == ir::Op::kSgdUpdate || n->op() == ir::Op::kAllReduce) {
      const bool on_device_0 = n->op() == ir::Op::kAllReduce || n->device() == module.devices()[0];
      if (!on_device_0) continue;
      EXPECT_GT(measured->node_seconds[n->id()], 0) << n->describe();
      ++timed;
    }
  }
  // 2 convolutions (conv1 fused with its pool), 8 variables' updates, 3 all_reduces
  EXPECT_EQ(timed, 2 + 8 + 3);
  EXPECT_GT(measured->step_s, 0);
  const std::vector<double>& t = measured->node_seconds;
  sim::SimResult r = sim::simulateStreams(
      sim::deviceSchedule(module, g, 0, [&t](const ir::Node& n) { return t[n.id()]; }));
  EXPECT_GE(r.step_s, r.compute_s);
  EXPECT_GT(r.compute_s, 0);
}

}  // namespace
}  // namespace tandem::runtime
