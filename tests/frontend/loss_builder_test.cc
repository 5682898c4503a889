// The Builder's losses as nodes: a mean divides by the global count read off the graph the
// build makes for the global batch (batch x elements per example, or the labels' count);
// ignore_index or class weights wire target_weight_sum's total instead; class weights
// given as values become f32 constants; bad options are errors naming the layer and the
// source line.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/builder.h"
#include "frontend/builder_internals.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"

namespace tandem {
namespace {

/// A graph with f32 x [8, 3, 5], its f32 target and i32 labels [8, 3], built by `body`.
struct LossBuild {
  ir::Module module{"losses"};
  Builder b = BuilderInternals::make(module, {.batch = 8});
  ir::Graph* g = nullptr;
  Tensor x, target, labels;
  LossBuild() {
    g = *module.addGraph(std::string(ir::kTrainGraph));
    BuilderInternals::beginGraph(b, g, true);
    x = BuilderInternals::addInput(b, "x", {ir::DType::kF32, {8, 3, 5}});
    target = BuilderInternals::addInput(b, "t", {ir::DType::kF32, {8, 3, 5}});
    labels = BuilderInternals::addInput(b, "y", {ir::DType::kI32, {8, 3}});
  }
  std::vector<const ir::Node*> nodesOf(ir::Op op) const {
    std::vector<const ir::Node*> out;
    for (const auto& n : g->nodes())
      if (n->op() == op) out.push_back(n.get());
    return out;
  }
};

TEST(LossBuilder, PointwiseMeansDivideByTheGlobalElementCount) {
  LossBuild s;
  Tensor mse = s.b.mseLoss(s.x, s.target);
  Tensor l1 = s.b.l1Loss(s.x, s.target, {.reduction = ir::Reduction::kSum});
  Tensor huber = s.b.smoothL1Loss(s.x, s.target, 0.25, {.name = "huber"});
  Tensor bce = s.b.bceWithLogits(s.x, s.target);
  ASSERT_TRUE(s.b.status().ok()) << s.b.status();
  EXPECT_EQ(ir::MseLossView(*mse.value()->def()).divisor(), 8 * 3 * 5);
  EXPECT_EQ(ir::L1LossView(*l1.value()->def()).divisor(), 1);
  const ir::SmoothL1LossView h(*huber.value()->def());
  EXPECT_EQ(h.beta(), 0.25);
  EXPECT_EQ(huber.value()->name(), "huber");
  EXPECT_EQ(ir::BceWithLogitsView(*bce.value()->def()).pos_weight(), nullptr);
  EXPECT_EQ(mse.value()->type(), (ir::TensorType{ir::DType::kF32, {}}));
}

TEST(LossBuilder, CrossEntropyWiresATotalOnlyForADataDependentMean) {
  LossBuild s;
  // Classes on the last axis of [8, 3, 5]: labels [8, 3].
  Tensor plain = s.b.crossEntropy(s.x, s.labels, {.axis = -1});
  ASSERT_TRUE(s.b.status().ok()) << s.b.status();
  const ir::SoftmaxCrossEntropyView p(*plain.value()->def());
  EXPECT_EQ(p.axis(), 2);
  EXPECT_EQ(p.divisor(), 24) << "the global number of targets";
  EXPECT_EQ(p.total(), nullptr);
  EXPECT_TRUE(s.nodesOf(ir::Op::kTargetWeightSum).empty());

  Tensor ignoring = s.b.crossEntropy(s.x, s.labels, {.axis = 2, .ignore_index = 0});
  Tensor weighted = s.b.crossEntropy(s.x, s.labels, {.axis = -1, .class_weights = {3, 1, 1, 1, 2}});
  Tensor summed = s.b.crossEntropy(
      s.x, s.labels,
      {.reduction = ir::Reduction::kSum, .axis = -1, .ignore_index = 0, .label_smoothing = 0.1});
  ASSERT_TRUE(s.b.status().ok()) << s.b.status();
  const ir::SoftmaxCrossEntropyView i(*ignoring.value()->def());
  ASSERT_NE(i.total(), nullptr);
  EXPECT_EQ(i.divisor(), 1);
  EXPECT_EQ(i.ignore_index(), 0);
  EXPECT_EQ(i.total()->def()->op(), ir::Op::kTargetWeightSum);
  EXPECT_EQ(ir::TargetWeightSumView(*i.total()->def()).ignore_index(), 0);

  const ir::SoftmaxCrossEntropyView w(*weighted.value()->def());
  ASSERT_NE(w.weight(), nullptr);
  EXPECT_TRUE(w.weighted());
  EXPECT_EQ(w.weight()->type(), (ir::TensorType{ir::DType::kF32, {5}}));
  ASSERT_NE(w.total(), nullptr);
  EXPECT_EQ(ir::TargetWeightSumView(*w.total()->def()).weight(), w.weight());
  // 3 | 1 1 1 | 2: three runs, three constants joined.
  EXPECT_EQ(w.weight()->def()->op(), ir::Op::kConcatAxis);
  EXPECT_EQ(w.weight()->def()->numOperands(), 3u);

  const ir::SoftmaxCrossEntropyView su(*summed.value()->def());
  EXPECT_EQ(su.total(), nullptr) << "a sum divides by nothing";
  EXPECT_EQ(su.divisor(), 1);
  EXPECT_EQ(su.label_smoothing(), 0.1);
  EXPECT_EQ(s.nodesOf(ir::Op::kTargetWeightSum).size(), 2u);
}

TEST(LossBuilder, BadOptionsAreErrorsNamingTheLayerAndTheLine) {
  struct Bad {
    CrossEntropyOptions o;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {{.axis = 0}, "axis 0 is not a class axis of the logits f32[8,3,5]"},
      {{.axis = -3}, "axis -3 is not a class axis"},
      {{.label_smoothing = 1.0}, "label_smoothing must be in [0, 1), got 1"},
  };
  for (const Bad& c : bad) {
    LossBuild s;
    const int line = __LINE__ + 1;
    Tensor loss = s.b.crossEntropy(s.x, s.labels, c.o);
    EXPECT_FALSE(loss.valid());
    const std::string msg(s.b.status().message());
    EXPECT_NE(
        msg.find(absl::StrCat("layer loss (softmax_cross_entropy) at loss_builder_test.cc:", line)),
        std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  LossBuild s;
  Tensor w = BuilderInternals::addInput(s.b, "w", {ir::DType::kF32, {5}});
  s.b.crossEntropy(s.x, s.labels, {.axis = -1, .class_weights = {1, 2, 3, 4, 5}, .weight = w});
  EXPECT_NE(std::string(s.b.status().message()).find("not both"), std::string::npos)
      << s.b.status();
  LossBuild t;
  t.b.crossEntropy(t.x, t.labels);  // axis 1: labels would be [8, 5]
  EXPECT_NE(std::string(t.b.status().message()).find("must be i32[8,5]"), std::string::npos)
      << t.b.status();
}

}  // namespace
}  // namespace tandem
