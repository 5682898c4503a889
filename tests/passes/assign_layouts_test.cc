// assign-layouts on whole models: each device's activations under its own target's rules,
// the same answer as the rules solved for that target alone, nothing for --plain-layout,
// and the same plan again when run twice. The printed form, the CUDA rules and the
// verifier's refusals are in tests/checks/passes/assign_layouts.tir; the kernels that take
// the layouts in tests/backend/blocked_layout_test.cc and tests/cuda/nhwc_kernels_test.cc.

#include "passes/assign_layouts.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "ir/layout_rules.h"
#include "ir/plan.h"
#include "ir/printer.h"
#include "ir/target.h"
#include "passes/pipeline.h"
#include "tests/device_kinds.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

std::unique_ptr<ir::Module> compiled(const std::string& model, const char* kind, bool layouts) {
  auto m = buildZooModel(model, 16);
  passes::PipelineConfig c;
  c.devices = {{::tandem::testing::kind(kind), 0}, {::tandem::testing::kind(kind), 1}};
  c.layouts = layouts;
  absl::Status s = runPipeline(*m, passes::defaultPipeline(c));
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(m) : nullptr;
}

// Per kind: the pass's plan equals the target's rules solved over the graph alone (every
// node on one device kind), and device 0 and device 1 keep as many values each.
TEST(AssignLayouts, EachDeviceUnderItsTargetsRules) {
  for (const char* kind : {"cpu", "cuda"}) {
    SCOPED_TRACE(kind);
    auto m = compiled("resnet18", kind, /*layouts=*/true);
    ASSERT_NE(m, nullptr);
    const ir::TargetInfo* t = ir::findTarget(::tandem::testing::kind(kind));
    ASSERT_NE(t, nullptr);
    if (t->preferred_layout == ir::ActivationLayout::kPlain)
      GTEST_SKIP() << "this host's " << t->display_name << " target keeps every tensor plain";
    const ir::Graph& g = *m->graph(ir::kTrainGraph);
    ASSERT_TRUE(g.plan()->has(ir::PlanPart::kLayouts));
    const auto planned = ir::valuesPlannedIn(g, t->preferred_layout);
    EXPECT_EQ(planned, passes::valuesKeptUnder(g, *t));
    size_t on[2] = {0, 0};
    for (const ir::Value* v : planned) ++on[v->def()->device()->index];
    EXPECT_EQ(on[0], on[1]);
    EXPECT_GT(on[0], 50u);
  }
}

TEST(AssignLayouts, PlainLayoutLeavesThePassOut) {
  auto m = compiled("resnet18", "cpu", /*layouts=*/false);
  ASSERT_NE(m, nullptr);
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  EXPECT_FALSE(g.plan()->has(ir::PlanPart::kLayouts));
  EXPECT_TRUE(ir::valuesPlannedIn(g, ir::ActivationLayout::kChannelBlocked).empty());
}

TEST(AssignLayouts, RunTwiceGivesTheSamePlan) {
  auto m = compiled("resnet18", "cpu", /*layouts=*/true);
  ASSERT_NE(m, nullptr);
  const std::string once = ir::printModule(*m);
  ASSERT_TRUE(runPipeline(*m, "assign-layouts").ok());
  EXPECT_EQ(ir::printModule(*m), once);
}

TEST(AssignLayouts, NeedsAReplicatedModule) {
  auto m = buildZooModel("lenet", 8);
  absl::Status s = runPipeline(*m, "assign-layouts");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("layouts belong to devices (run replicate first)"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace tandem::testing
