// feed-learning-rate and the learning-rate factor operand: sgd_update's two optional
// operands (m told by momentum, lr_scale by the count), the grouped form's trailing
// factor, the shape rules' messages for a factor that is not the schedule's, and the
// pass's errors. The printed IR is checked in tests/checks/passes/feed_learning_rate.tir,
// training against PyTorch's schedulers in tests/runtime/adamw_training_test.cc.

#include "passes/feed_learning_rate.h"

#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "passes/registry.h"
#include "tests/passes/pass_test_util.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

// Two parameters, a momentum buffer, the fed factor and a plain f32[1] parameter.
constexpr char kModule[] = R"(module @m {
var @a : f32[3] {role=param, init=zeros}
var @a.momentum : f32[3] {role=optimizer, init=zeros}
var @c : f32[1] {role=param, init=zeros}
var @lr_scale : f32[1] {role=fed, init=ones}

graph @train_step(%ga: f32[3], %gc: f32[1]) {
  %a = param() {var=@a} : f32[3]
  %m = param() {var=@a.momentum} : f32[3]
  %c = param() {var=@c} : f32[1]
  %lr_scale = param() {var=@lr_scale} : f32[1]
UPDATES
  return
}
}
)";

absl::StatusOr<std::unique_ptr<ir::Module>> withUpdates(const std::string& updates) {
  return ir::parseModule(absl::StrReplaceAll(kModule, {{"UPDATES", updates}}), "lr.tir");
}

const ir::Node& lastNode(const ir::Module& m) {
  return *m.graph(ir::kTrainGraph)->nodes().back();
}

TEST(LrScaleOperand, SgdUpdatesOptionalsAreToldApart) {
  struct Case {
    std::string update;
    bool m, lr;
  };
  for (const Case& c : std::vector<Case>{
           {"  sgd_update(%a, %ga) {lr=0.1, momentum=0, weight_decay=0}", false, false},
           {"  sgd_update(%a, %ga, %lr_scale) {lr=0.1, momentum=0, weight_decay=0}", false, true},
           {"  sgd_update(%a, %ga, %m) {lr=0.1, momentum=0.9, weight_decay=0}", true, false},
           {"  sgd_update(%a, %ga, %m, %lr_scale) {lr=0.1, momentum=0.9, weight_decay=0}", true,
            true},
       }) {
    SCOPED_TRACE(c.update);
    auto m = withUpdates(c.update);
    ASSERT_TRUE(m.ok()) << m.status();
    const ir::Node& n = lastNode(**m);
    const ir::SgdUpdateView v(n);
    EXPECT_EQ(v.m() != nullptr, c.m);
    EXPECT_EQ(v.lr_scale() != nullptr, c.lr);
    if (c.m) {
      EXPECT_EQ(v.m()->name(), "m");
    }
    const ir::UpdateView u = *ir::UpdateView::of(n);
    EXPECT_EQ(u.lrScale(), v.lr_scale());
    if (c.lr) {
      EXPECT_EQ(u.lrScaleOperand(), n.numOperands() - 1);
    }
    // The factor writes nothing: only the weight and the buffer are the update's.
    EXPECT_EQ(n.info().rules->writes(n).size(), c.m ? 2u : 1u);
  }
}

TEST(LrScaleOperand, GroupedFormTakesItLast) {
  auto m = withUpdates(
      "  sgd_update_group(%a, %c, %ga, %gc, %lr_scale) {lr=0.1, momentum=0, weight_decay=0}");
  ASSERT_TRUE(m.ok()) << m.status();
  const ir::UpdateView u = *ir::UpdateView::of(lastNode(**m));
  EXPECT_EQ(u.numParams(), 2u);
  ASSERT_NE(u.lrScale(), nullptr);
  EXPECT_EQ(u.lrScale()->name(), "lr_scale");
  EXPECT_EQ(u.grad(1)->name(), "gc");
}

TEST(LrScaleOperand, AFactorThatIsNotTheSchedulesIsNamed) {
  struct Case {
    std::string update, error;
  };
  for (const Case& c : std::vector<Case>{
           {"  sgd_update(%a, %ga, %c) {lr=0.1, momentum=0, weight_decay=0}",
            "must be read straight from a variable of role fed"},
           {"  sgd_update(%a, %ga, %m, %gc) {lr=0.1, momentum=0.9, weight_decay=0}",
            "must be read straight from a variable of role fed"},
           {"  sgd_update(%a, %ga, %m, %lr_scale, %lr_scale) {lr=0.1, momentum=0.9, "
            "weight_decay=0}",
            "sgd_update: takes 2"},
           {"  sgd_update(%a, %ga, %lr_scale, %lr_scale) {lr=0.1, momentum=0, weight_decay=0}",
            "momentum is 0, so the operands are w, g and an optional lr_scale"},
           {"  sgd_update_group(%a, %c, %ga, %gc, %c) {lr=0.1, momentum=0, weight_decay=0}",
            "5 operands are not 2 x k"},
       }) {
    SCOPED_TRACE(c.update);
    auto m = withUpdates(c.update);
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(m.status().message(), HasSubstr(c.error));
  }
}

TEST(FeedLearningRate, Errors) {
  // Before autodiff: nothing to feed.
  auto m = withUpdates("");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->findVar("lr_scale") != nullptr);
  // The module has @lr_scale already: left alone.
  EXPECT_TRUE(runPipeline(**m, "feed-learning-rate").ok());
  auto lenet = buildZooModel("lenet", 8);
  ASSERT_NE(lenet, nullptr);
  EXPECT_THAT(std::string(runPipeline(*lenet, "feed-learning-rate").message()),
              HasSubstr("has no optimizer update (run autodiff first)"));
  ASSERT_TRUE(runPipeline(*lenet, "autodiff,replicate{devices=2}").ok());
  EXPECT_THAT(std::string(runPipeline(*lenet, "feed-learning-rate").message()),
              HasSubstr("run it before replicate"));
  passes::PassOptions opts("feed-learning-rate", {{"lr", "2"}});
  EXPECT_FALSE(passes::createPass("feed-learning-rate", opts).ok());
}

}  // namespace
}  // namespace tandem::testing
