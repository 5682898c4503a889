// The loss ops (mse_loss, l1_loss, smooth_l1_loss, bce_with_logits, and
// softmax_cross_entropy with a class axis, ignore_index, class weights and label
// smoothing, with target_weight_sum's total) through their kernel slots and gradient
// rules (GraphEval: the rules' nodes run on the CPU kernels too) against PyTorch 1.13
// (tests/data/gen_loss_refs.py); bad operands and attributes as errors naming the node;
// the per-element math the CUDA kernels share checked at its edges.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/cross_entropy_math.h"
#include "backend/pointwise_loss_math.h"
#include "graph_eval.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

ir::Shape refShape(const RefTensor& t) { return ir::Shape(t.shape.begin(), t.shape.end()); }

RefCase loadLossRef(const std::string& name) {
  // RefCase::load reads tests/data/transformer_refs/<name>.ref; these cases are in the
  // sibling folder gen_loss_refs.py writes.
  auto c = RefCase::load("../loss_refs/" + name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : RefCase();
}

void fillLabels(Buffer& b, const std::vector<int32_t>& ids) {
  ASSERT_EQ(b.size(), static_cast<int64_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) b.i32()[i] = ids[i];
}

ir::Reduction reductionOf(const RefCase& c) {
  return c.text("reduction") == "mean" ? ir::Reduction::kMean : ir::Reduction::kSum;
}

std::string lossCreateError(GraphEval& e, ir::NodeSpec spec) {
  auto n = e.add(std::move(spec));
  return n.ok() ? std::string("no error") : std::string(n.status().message());
}

// ---- pointwise losses ---------------------------------------------------------------------

ir::Op pointwiseOp(const std::string& name) {
  if (name == "mse_loss") return ir::Op::kMseLoss;
  if (name == "l1_loss") return ir::Op::kL1Loss;
  if (name == "smooth_l1_loss") return ir::Op::kSmoothL1Loss;
  return ir::Op::kBceWithLogits;
}

// The kernels sum in double and round once; PyTorch's f32 sums round at every step: an ulp
// or two of the loss's scale (1e-6). The gradient is one f32 rounding of the same formula.
TEST(PointwiseLosses, LossAndGradientMatchPyTorch) {
  for (const char* name :
       {"mse_mean", "mse_sum_3d", "l1_mean", "l1_sum", "smooth_l1_beta1", "smooth_l1_beta05_sum",
        "smooth_l1_beta0", "bce_mean", "bce_large_logits", "bce_pos_weight", "bce_pos_weight_3d"}) {
    SCOPED_TRACE(name);
    const RefCase c = loadLossRef(name);
    const RefTensor& xr = c.tensor("x");
    GraphEval e;
    ir::Value* x = e.input("x", f32Of(xr.shape));
    ir::Value* t = e.input("target", f32Of(xr.shape));
    ir::Value* pw =
        c.integer("has_pos_weight") ? e.input("pw", f32Of(c.tensor("pos_weight").shape)) : nullptr;
    const ir::Reduction reduction = reductionOf(c);
    std::vector<std::pair<std::string, ir::AttrValue>> attrs = {
        {"reduction", ir::EnumWord{std::string(c.text("reduction"))}},
        {"divisor", reduction == ir::Reduction::kMean ? xr.size() : int64_t{1}}};
    const ir::Op op = pointwiseOp(c.text("op"));
    if (op == ir::Op::kSmoothL1Loss) attrs.push_back({"beta", c.num("beta")});
    std::vector<ir::Value*> operands{x, t};
    if (pw != nullptr) operands.push_back(pw);
    auto n = e.add(ir::NodeSpec{.op = op, .operands = operands, .attrs = attrs, .names = {"loss"}});
    ASSERT_TRUE(n.ok()) << n.status();
    ir::Value* dloss = e.input("dloss", f32Of({}));
    std::vector<bool> needs(operands.size(), false);
    needs[0] = true;
    const std::vector<ir::Value*> grads = e.grad(**n, dloss, needs);
    ASSERT_NE(grads[0], nullptr);
    EXPECT_EQ(grads[1], nullptr) << "the target gets no gradient";
    fillFrom(e.buffer(x), xr.values);
    fillFrom(e.buffer(t), c.tensor("target").values);
    if (pw != nullptr) fillFrom(e.buffer(pw), c.tensor("pos_weight").values);
    e.buffer(dloss).f32()[0] = static_cast<float>(c.num("dloss"));
    e.run();
    EXPECT_LE(relativeError(valuesOf(e.buffer((*n)->result())), c.tensor("loss")), 1e-6);
    EXPECT_LE(relativeError(valuesOf(e.buffer(grads[0])), c.tensor("dx")), 1e-6);
  }
}

// A target computed from trained weights (distillation) would silently get no gradient;
// the rule refuses it, naming the operand.
TEST(PointwiseLosses, ATargetThatNeedsAGradientIsAnError) {
  GraphEval e;
  ir::Value* x = e.input("x", f32Of({2, 3}));
  ir::Value* t = e.input("t", f32Of({2, 3}));
  auto n = e.add(
      ir::MseLossArgs{.x = x, .target = t, .reduction = ir::Reduction::kMean, .divisor = 6}.spec(
          {.names = {"loss"}}));
  ASSERT_TRUE(n.ok()) << n.status();
  ir::Value* dloss = e.input("dloss", f32Of({}));
  struct Context final : ir::GradContext {
    GraphEval* eval;
    const ir::Node* fwd;
    ir::Value* dc;
    const ir::Node& node() const override { return *fwd; }
    ir::Value* resultGrad(size_t i) const override { return i == 0 ? dc : nullptr; }
    bool needsGrad(size_t) const override { return true; }
    void addOperandGrad(size_t, ir::Value*) override {}
    absl::StatusOr<ir::Node*> emit(ir::NodeSpec spec) override {
      return eval->add(std::move(spec));
    }
  } ctx;
  ctx.eval = &e, ctx.fwd = *n, ctx.dc = dloss;
  const absl::Status s = (*n)->info().rules->grad(ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("target (%t: f32[2,3]) depends on a trained weight"),
            std::string::npos)
      << s;
}

TEST(PointwiseLosses, BadOperandsAndAttributesAreErrorsNamingTheNode) {
  GraphEval e;
  ir::Value* x = e.input("x", f32Of({4, 3}));
  ir::Value* t = e.input("t", f32Of({4, 3}));
  ir::Value* other = e.input("other", f32Of({4, 2}));
  ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {4, 3}});
  ir::Value* pw_bad = e.input("pw_bad", f32Of({4}));
  ir::Value* pw_row = e.input("pw_row", f32Of({3}));
  struct Bad {
    ir::NodeSpec spec;
    std::vector<std::string> says;
  };
  const auto mse = [](ir::Value* a, ir::Value* b, ir::Reduction r, int64_t d, const char* name) {
    return ir::MseLossArgs{.x = a, .target = b, .reduction = r, .divisor = d}.spec(
        {.names = {name}});
  };
  const std::vector<Bad> bad = {
      {mse(x, other, ir::Reduction::kMean, 12, "shapes"), {"%shapes", "must have the same type"}},
      {mse(x, labels, ir::Reduction::kMean, 12, "ints"), {"%ints", "target", "must be f32"}},
      {mse(x, t, ir::Reduction::kSum, 12, "sum_div"), {"%sum_div", "divisor must be 1"}},
      {mse(x, t, ir::Reduction::kMean, 0, "zero"), {"%zero", "divisor must be >= 1"}},
      {ir::SmoothL1LossArgs{
           .x = x, .target = t, .reduction = ir::Reduction::kMean, .divisor = 12, .beta = -1}
           .spec({.names = {"beta"}}),
       {"%beta", "beta must be >= 0"}},
      {ir::BceWithLogitsArgs{.x = x,
                             .target = t,
                             .pos_weight = pw_bad,
                             .reduction = ir::Reduction::kMean,
                             .divisor = 12}
           .spec({.names = {"pw"}}),
       {"%pw", "pos_weight (%pw_bad: f32[4])", "trailing axes"}},
  };
  for (const Bad& b : bad) {
    const std::string err = lossCreateError(e, b.spec);
    for (const std::string& want : b.says)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
  EXPECT_EQ(lossCreateError(e, ir::BceWithLogitsArgs{.x = x,
                                                     .target = t,
                                                     .pos_weight = pw_row,
                                                     .reduction = ir::Reduction::kMean,
                                                     .divisor = 12}
                                   .spec({.names = {"fine"}})),
            "no error");
}

// The math the CUDA kernels run too, at its edges: BCE stays finite for logits far past
// exp's range, and smooth L1's two pieces meet at |d| = beta.
TEST(PointwiseLossMath, StableAndContinuousAtTheEdges) {
  EXPECT_NEAR(backend::BceWithLogitsMath::forward(1000.0f, 0.0f, 1.0), 1000.0, 1e-9);
  EXPECT_NEAR(backend::BceWithLogitsMath::forward(-1000.0f, 1.0f, 1.0), 1000.0, 1e-9);
  EXPECT_EQ(backend::BceWithLogitsMath::forward(1000.0f, 1.0f, 1.0), 0.0);
  EXPECT_EQ(backend::BceWithLogitsMath::backward(-1000.0f, 0.0f, 1.0, 1.0), 0.0f);
  EXPECT_EQ(backend::BceWithLogitsMath::backward(-1000.0f, 1.0f, 2.0, 1.0), -2.0f);
  const double beta = 0.5;
  EXPECT_NEAR(backend::SmoothL1LossMath::forward(0.5f, 0.0f, beta),
              backend::SmoothL1LossMath::forward(0.5000001f, 0.0f, beta), 1e-6);
  EXPECT_EQ(backend::SmoothL1LossMath::backward(0.5f, 0.0f, beta, 1.0), 1.0f);
  EXPECT_EQ(backend::L1LossMath::backward(2.0f, 2.0f, 0.0, 1.0), 0.0f);
  // PyTorch's sign of a NaN difference is 0 (its kernel's (d > 0) - (d < 0)).
  EXPECT_EQ(backend::L1LossMath::backward(NAN, 2.0f, 0.0, 1.0), 0.0f);
  // Smooth L1 with beta = 0 takes PyTorch's first branch at d = 0: d <= -beta gives -1.
  EXPECT_EQ(backend::SmoothL1LossMath::backward(2.0f, 2.0f, 0.0, 1.0), -1.0f);
}

// ---- softmax_cross_entropy: class axis, ignore_index, weights, smoothing, total ----------

/// The loss of a reference case as nodes: with a mean that ignores or weighs targets,
/// target_weight_sum's total is what it divides by (one device: no all_reduce).
struct CrossEntropyGraph {
  GraphEval e;
  ir::Value *logits, *labels, *weight = nullptr, *total = nullptr, *dloss = nullptr;
  ir::Node* loss = nullptr;
  ir::Value* dlogits = nullptr;
  explicit CrossEntropyGraph(const RefCase& c) {
    const RefTensor& lr = c.tensor("logits");
    logits = e.input("logits", f32Of(lr.shape));
    labels = e.input("labels", ir::TensorType{ir::DType::kI32, refShape(c.tensor("labels"))});
    const bool weighted = c.integer("weighted") != 0;
    if (weighted) weight = e.input("weight", f32Of(c.tensor("weight").shape));
    const ir::Reduction reduction = reductionOf(c);
    const int64_t ignore = c.integer("ignore_index");
    const bool with_total =
        reduction == ir::Reduction::kMean && (weighted || c.integer("has_ignore_index") != 0);
    if (with_total) {
      auto t = e.add(
          ir::TargetWeightSumArgs{.labels = labels, .weight = weight, .ignore_index = ignore}.spec(
              {.names = {"total"}}));
      EXPECT_TRUE(t.ok()) << t.status();
      if (!t.ok()) return;
      total = (*t)->result();
    }
    auto n = e.add(ir::SoftmaxCrossEntropyArgs{
        .logits = logits,
        .labels = labels,
        .weight = weight,
        .total = total,
        .reduction = reduction,
        .divisor = with_total || reduction == ir::Reduction::kSum ? 1 : c.tensor("labels").size(),
        .label_smoothing = c.num("smoothing"),
        .axis = c.integer("axis"),
        .ignore_index = ignore,
        .weighted = weighted}
                       .spec({.names = {"loss"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) return;
    loss = *n;
    dloss = e.input("dloss", f32Of({}));
    std::vector<bool> needs(loss->numOperands(), false);
    needs[0] = true;
    dlogits = e.grad(*loss, dloss, needs)[0];
  }
  void fill(const RefCase& c) {
    fillFrom(e.buffer(logits), c.tensor("logits").values);
    fillLabels(e.buffer(labels), c.tensor("labels").i32());
    if (weight != nullptr) fillFrom(e.buffer(weight), c.tensor("weight").values);
    e.buffer(dloss).f32()[0] = static_cast<float>(c.num("dloss"));
  }
};

TEST(CrossEntropyOptions, LossAndGradientMatchPyTorch) {
  for (const char* name :
       {"ce_last_axis_3d", "ce_axis1_4d", "ce_ignore", "ce_weight", "ce_weight_smooth",
        "ce_weight_sum", "ce_weight_smooth_3d", "ce_smooth_ignore"}) {
    SCOPED_TRACE(name);
    const RefCase c = loadLossRef(name);
    CrossEntropyGraph g(c);
    ASSERT_NE(g.dlogits, nullptr);
    const ir::Node& back = *g.dlogits->def();
    ASSERT_TRUE(ir::SoftmaxCrossEntropyBackwardView::is(back));
    EXPECT_EQ(ir::SoftmaxCrossEntropyBackwardView(back).weight(), g.weight);
    EXPECT_EQ(ir::SoftmaxCrossEntropyBackwardView(back).total(), g.total);
    g.fill(c);
    g.e.run();
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.loss->result())), c.tensor("loss")), 1e-6);
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.dlogits)), c.tensor("dlogits")), 1e-6);
  }
}

// The [N, C] loss of before (no axis, ignore_index, weights or total) prints as it did and
// computes its bits through the same loops: the zoo's figures do not move.
TEST(CrossEntropyOptions, ThePlainLossPrintsAndComputesAsBefore) {
  const std::string text = R"(module @m {
graph @g(%logits: f32[4,3], %labels: i32[4], %w: f32[3]) {
  %plain = softmax_cross_entropy(%logits, %labels) {reduction=mean, divisor=4} : f32[]
  %total = target_weight_sum(%labels, %w) {ignore_index=2} : f32[]
  %weighted = softmax_cross_entropy(%logits, %labels, %w, %total) {reduction=mean, divisor=1, ignore_index=2, weighted=true} : f32[]
  %axis = softmax_cross_entropy(%logits, %labels, %total) {reduction=mean, divisor=1, axis=1} : f32[]
  return %plain, %weighted, %axis
}
}
)";
  auto m = ir::parseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string printed = ir::printModule(**m, {.locations = false});
  EXPECT_NE(printed.find("softmax_cross_entropy(%logits, %labels) {reduction=mean, divisor=4} : "
                         "f32[]"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("{reduction=mean, divisor=1, ignore_index=2, weighted=true}"),
            std::string::npos)
      << printed;
  // axis=1 is the default: not printed; the total is told by the count.
  EXPECT_NE(printed.find("softmax_cross_entropy(%logits, %labels, %total) {reduction=mean, "
                         "divisor=1} : f32[]"),
            std::string::npos)
      << printed;
  auto again = ir::parseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::printModule(**again, {.locations = false}), printed);
  const ir::Graph& g = *(*m)->graph("g");
  const ir::SoftmaxCrossEntropyView weighted(*g.findValue("weighted")->def());
  EXPECT_EQ(weighted.weight(), g.findValue("w"));
  EXPECT_EQ(weighted.total(), g.findValue("total"));
  const ir::SoftmaxCrossEntropyView axis(*g.findValue("axis")->def());
  EXPECT_EQ(axis.weight(), nullptr);
  EXPECT_EQ(axis.total(), g.findValue("total"));
}

TEST(CrossEntropyOptions, BadOperandsAndAttributesAreErrorsNamingTheNode) {
  GraphEval e;
  ir::Value* logits = e.input("logits", f32Of({2, 3, 5}));
  ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {2, 3}});
  ir::Value* w5 = e.input("w5", f32Of({5}));
  ir::Value* w3 = e.input("w3", f32Of({3}));
  ir::Value* total = e.input("total", f32Of({}));
  const auto ce = [&](ir::Value* w, ir::Value* t, int64_t axis, bool weighted, ir::Reduction r,
                      int64_t divisor, const char* name) {
    return ir::SoftmaxCrossEntropyArgs{.logits = logits,
                                       .labels = labels,
                                       .weight = w,
                                       .total = t,
                                       .reduction = r,
                                       .divisor = divisor,
                                       .axis = axis,
                                       .weighted = weighted}
        .spec({.names = {name}});
  };
  struct Bad {
    ir::NodeSpec spec;
    std::vector<std::string> says;
  };
  const auto kMean = ir::Reduction::kMean;
  const std::vector<Bad> bad = {
      {ce(nullptr, nullptr, 1, false, kMean, 6, "axis1"),
       {"%axis1", "labels (%labels: i32[2,3]) must be i32[2,5]", "class axis 1"}},
      {ce(nullptr, nullptr, 3, false, kMean, 6, "axis3"), {"%axis3", "rank >= 2", "axis 3"}},
      {ce(nullptr, nullptr, 0, false, kMean, 6, "axis0"), {"%axis0", "axis must be >= 1"}},
      {ce(w3, nullptr, 2, true, kMean, 6, "w3"), {"%w3", "weight (%w3: f32[3]) must be f32[5]"}},
      {ce(nullptr, total, 2, false, kMean, 6, "div"),
       {"%div", "needs reduction=mean and divisor=1"}},
      {ce(nullptr, total, 2, false, ir::Reduction::kSum, 1, "sum"),
       {"%sum", "needs reduction=mean and divisor=1"}},
      {ce(nullptr, w5, 2, false, kMean, 1, "nototal"), {"%nototal", "must be f32[]"}},
      {ce(nullptr, nullptr, 2, true, kMean, 6, "noweight"), {"%noweight", "weighted=true"}},
  };
  for (const Bad& b : bad) {
    const std::string err = lossCreateError(e, b.spec);
    for (const std::string& want : b.says)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
  EXPECT_EQ(lossCreateError(e, ce(w5, total, 2, true, kMean, 1, "fine")), "no error");
}

// target_weight_sum counts what the loss counts: labels >= 0 other than ignore_index, by
// their class weight; a label past the weights' classes is NaN, as its loss.
TEST(TargetWeightSum, CountsTheTargetsTheLossCounts) {
  GraphEval e;
  ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {2, 4}});
  ir::Value* w = e.input("w", f32Of({3}));
  auto count = e.add(
      ir::TargetWeightSumArgs{.labels = labels, .ignore_index = 1}.spec({.names = {"count"}}));
  auto sum = e.add(ir::TargetWeightSumArgs{.labels = labels, .weight = w}.spec({.names = {"sum"}}));
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_TRUE(sum.ok()) << sum.status();
  fillLabels(e.buffer(labels), {0, 1, 2, -1, 1, 1, -100, 0});
  fillFrom(e.buffer(w), {0.5, 2.0, 4.0});
  e.run();
  EXPECT_EQ(e.buffer((*count)->result()).f32()[0], 3.0f);  // 0, 2, 0
  EXPECT_EQ(e.buffer((*sum)->result()).f32()[0], 0.5f + 2 + 4 + 2 + 2 + 0.5f);
  fillLabels(e.buffer(labels), {0, 1, 3, -1, 1, 1, -100, 0});
  e.run();
  EXPECT_TRUE(std::isnan(e.buffer((*sum)->result()).f32()[0]));
  EXPECT_EQ(e.buffer((*count)->result()).f32()[0], 3.0f) << "no weights: any label counts";
}

// The weighted row math the CUDA kernel runs with a warp's lanes: with weights of 1 it is
// the unweighted math (the same loss, the same gradient to a rounding).
TEST(CrossEntropyMath, UnitWeightsAreTheUnweightedLoss) {
  const float row[5] = {0.3f, -1.2f, 2.5f, 0.0f, 1.1f};
  const float ones[5] = {1, 1, 1, 1, 1};
  for (double eps : {0.0, 0.2}) {
    const double max = backend::ceLaneMax(row, 5, 0, 1);
    const backend::CeLaneSums s = backend::ceLaneSums(row, 5, max, 0, 1);
    const double lse = backend::ceLogSumExp(max, s.exp_sum);
    const double wsum = backend::ceLaneWeightedSum(row, ones, 5, 0, 1);
    EXPECT_NEAR(backend::ceRowLossWeighted(row, ones, 5, 2, lse, wsum, 5.0, eps),
                backend::ceRowLoss(row, 5, 2, lse, s.sum, eps), 1e-12);
    for (int j = 0; j < 5; ++j)
      EXPECT_NEAR(backend::ceGradWeighted(row[j], j == 2, 1.0, 1.0, 5.0, lse, eps, 5, 0.5),
                  backend::ceGrad(row[j], j == 2, lse, eps, 5, 0.5), 1e-7);
  }
  // Strided classes (an axis before the last) read the same values.
  const float strided[10] = {0.3f, 9, -1.2f, 9, 2.5f, 9, 0.0f, 9, 1.1f, 9};
  EXPECT_EQ(backend::ceLaneMax(strided, 5, 0, 1, 2), backend::ceLaneMax(row, 5, 0, 1));
  EXPECT_EQ(backend::ceLaneSums(strided, 5, 2.5, 0, 1, 2).exp_sum,
            backend::ceLaneSums(row, 5, 2.5, 0, 1).exp_sum);
}

}  // namespace
}  // namespace tandem::testing

namespace tandem::testing {
namespace {

// An ignore_index past the classes (a vocabulary's padding id beyond it) is skipped like a
// negative label, never read as a class: the same loss and gradient as padding.
TEST(CrossEntropyOptions, AnIgnoreIndexPastTheClassesIsPadding) {
  GraphEval e;
  ir::Value* logits = e.input("logits", f32Of({3, 4}));
  ir::Value* ignored = e.input("ignored", ir::TensorType{ir::DType::kI32, {3}});
  ir::Value* padded = e.input("padded", ir::TensorType{ir::DType::kI32, {3}});
  const auto loss = [&](ir::Value* labels, int64_t ignore, const char* name) {
    auto n = e.add(ir::SoftmaxCrossEntropyArgs{.logits = logits,
                                               .labels = labels,
                                               .reduction = ir::Reduction::kSum,
                                               .divisor = 1,
                                               .label_smoothing = 0.1,
                                               .ignore_index = ignore}
                       .spec({.names = {name}}));
    EXPECT_TRUE(n.ok()) << n.status();
    return *n;
  };
  ir::Node* a = loss(ignored, 9, "a");
  ir::Node* b = loss(padded, -100, "b");
  ir::Value* dloss = e.input("dloss", f32Of({}));
  ir::Value* da = e.grad(*a, dloss, {true, false})[0];
  ir::Value* db = e.grad(*b, dloss, {true, false})[0];
  std::mt19937 rng(5);
  e.buffer(logits).fillUniform(rng, -3, 3);
  fillLabels(e.buffer(ignored), {1, 9, 2});
  fillLabels(e.buffer(padded), {1, -1, 2});
  e.buffer(dloss).f32()[0] = 1.0f;
  e.run();
  EXPECT_EQ(e.buffer(a->result()).f32()[0], e.buffer(b->result()).f32()[0]);
  EXPECT_EQ(valuesOf(e.buffer(da)), valuesOf(e.buffer(db)));
  for (int j = 4; j < 8; ++j) EXPECT_EQ(e.buffer(da).f32()[j], 0.0f);
}

}  // namespace
}  // namespace tandem::testing
