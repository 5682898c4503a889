// autodiff on the zoo models and on small hand-written modules: one sgd_update per
// trained parameter with a gradient of the parameter's exact type, none for buffers,
// optimizer state for momentum, and the errors a user can run into.

#include "passes/autodiff.h"

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

/// sgd_update nodes of @train_step, by the variable they write.
std::multimap<std::string, const ir::Node*> updatesByVar(const ir::Module& m) {
  std::multimap<std::string, const ir::Node*> out;
  for (const ir::Node* n : nodesWithOp(*m.graph(ir::kTrainGraph), ir::Op::kSgdUpdate))
    out.emplace(updatedVar(*n), n);
  return out;
}

struct ZooCase {
  std::string model;
  int64_t batch;
};
void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.model << " at batch " << c.batch; }

class AutodiffZoo : public ::testing::TestWithParam<ZooCase> {};

TEST_P(AutodiffZoo, OneUpdatePerParameterWithItsType) {
  auto m = buildZooModel(GetParam().model, GetParam().batch);
  ASSERT_NE(m, nullptr);
  size_t nodes_before = m->graph(ir::kTrainGraph)->numNodes();
  ASSERT_TRUE(runPipeline(*m, "autodiff{lr=0.2}").ok());
  EXPECT_GT(m->graph(ir::kTrainGraph)->numNodes(), nodes_before);

  auto updates = updatesByVar(*m);
  size_t params = 0;
  for (const ir::Var& var : m->vars()) {
    size_t count = updates.count(var.name);
    if (var.role != ir::VarRole::kParam) {
      EXPECT_EQ(count, 0u) << "non-trained @" << var.name << " got an sgd_update";
      continue;
    }
    ++params;
    ASSERT_EQ(count, 1u) << "@" << var.name;
    const ir::Node& u = *updates.find(var.name)->second;
    ASSERT_EQ(u.numOperands(), 2u) << "no momentum: w and g only";
    EXPECT_EQ(u.operand(0)->type(), var.type) << "@" << var.name;
    EXPECT_EQ(u.operand(1)->type(), var.type) << "gradient of @" << var.name;
    // The gradient comes out of backward: a gradient op, or the sum of several.
    const ir::Node* g = u.operand(1)->def();
    EXPECT_TRUE(g->info().has(ir::kBackward) || g->op() == ir::Op::kAdd)
        << "gradient of @" << var.name << " is made by " << g->opName();
    EXPECT_DOUBLE_EQ(u.floatAttr("lr"), 0.2);
    EXPECT_DOUBLE_EQ(u.floatAttr("momentum"), 0);
    EXPECT_DOUBLE_EQ(u.floatAttr("weight_decay"), 0);
  }
  EXPECT_EQ(updates.size(), params) << "every sgd_update writes a trained parameter";
  EXPECT_GT(params, 0u);
  EXPECT_TRUE(varsWithRole(*m, ir::VarRole::kOptimizer).empty());
  // Only @train_step changes.
  EXPECT_TRUE(nodesWithOp(*m->graph(ir::kEvalGraph), ir::Op::kSgdUpdate).empty());
  EXPECT_TRUE(ir::verifyModule(*m).ok());
}

TEST_P(AutodiffZoo, UpdatesFollowBackwardOrder) {
  auto m = buildZooModel(GetParam().model, GetParam().batch);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff").ok());
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  auto pos = g.positions();
  size_t last_ready = 0, last_update = 0;
  for (const ir::Node* u : nodesWithOp(g, ir::Op::kSgdUpdate)) {
    size_t ready = pos.at(u->operand(1)->def());
    EXPECT_GE(ready, last_ready) << "updates are ordered by when their gradient is ready";
    EXPECT_GT(pos.at(u), ready);
    EXPECT_GT(pos.at(u), last_update);
    last_ready = ready;
    last_update = pos.at(u);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, AutodiffZoo,
                         ::testing::Values(ZooCase{"lenet", 256}, ZooCase{"resnet18", 16},
                                           ZooCase{"resnet50", 2}),
                         [](const auto& info) { return info.param.model; });

TEST(Autodiff, ResNet18HasOneUpdatePerVariableInTheSummary) {
  // 11,175,818 trained values: the sgd_updates cover exactly that many.
  auto m = buildZooModel("resnet18", 8);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff").ok());
  int64_t updated = 0;
  for (const ir::Node* u : nodesWithOp(*m->graph(ir::kTrainGraph), ir::Op::kSgdUpdate))
    updated += u->operand(1)->type().numElements();
  EXPECT_EQ(updated, 11175818);
  EXPECT_EQ(updated, m->countElements(ir::VarRole::kParam));
}

TEST(Autodiff, MomentumAddsOneZeroInitializedVariablePerParameter) {
  auto m = buildZooModel("resnet18", 8);
  ASSERT_NE(m, nullptr);
  std::vector<std::string> params = varsWithRole(*m, ir::VarRole::kParam);
  ASSERT_TRUE(runPipeline(*m, "autodiff{momentum=0.9,weight-decay=0.0005}").ok());

  std::vector<std::string> optimizer = varsWithRole(*m, ir::VarRole::kOptimizer);
  EXPECT_EQ(optimizer.size(), params.size());
  const ir::Graph& init = *m->graph(ir::kInitGraph);
  auto updates = updatesByVar(*m);
  for (const std::string& p : params) {
    const ir::Var* buffer = m->findVar(p + ".momentum");
    ASSERT_NE(buffer, nullptr) << p;
    EXPECT_EQ(buffer->role, ir::VarRole::kOptimizer);
    EXPECT_EQ(buffer->type, m->findVar(p)->type);
    EXPECT_EQ(buffer->init, ir::Initializer{ir::Initializer::Kind::kZeros});
    // @init computes and stores it once.
    int initializes = 0, assigns = 0;
    for (const auto& n : init.nodes()) {
      if (n->op() == ir::Op::kInitialize && n->symbolAttr("var") == buffer->name) ++initializes;
      if (n->op() == ir::Op::kAssign && n->symbolAttr("var") == buffer->name) {
        ++assigns;
        EXPECT_EQ(n->operand(0)->def()->op(), ir::Op::kInitialize);
      }
    }
    EXPECT_EQ(initializes, 1) << buffer->name;
    EXPECT_EQ(assigns, 1) << buffer->name;
    // The update reads the buffer as its third operand.
    ASSERT_EQ(updates.count(p), 1u) << p;
    const ir::Node& u = *updates.find(p)->second;
    ASSERT_EQ(u.numOperands(), 3u);
    ASSERT_EQ(u.operand(2)->def()->op(), ir::Op::kParam);
    EXPECT_EQ(u.operand(2)->def()->symbolAttr("var"), buffer->name);
    EXPECT_DOUBLE_EQ(u.floatAttr("momentum"), 0.9);
    EXPECT_DOUBLE_EQ(u.floatAttr("weight_decay"), 0.0005);
  }
  // Buffers (batch-norm statistics) get no optimizer state.
  for (const std::string& b : varsWithRole(*m, ir::VarRole::kBuffer))
    EXPECT_EQ(m->findVar(b + ".momentum"), nullptr) << b;
  EXPECT_TRUE(ir::verifyModule(*m).ok());
}

TEST(Autodiff, RunningTwiceIsAnError) {
  auto m = buildZooModel("lenet", 16);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff").ok());
  absl::Status s = runPipeline(*m, "autodiff");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("autodiff: graph @train_step already has a backward pass (sgd_update("));
}

TEST(Autodiff, AfterReplicateIsAnError) {
  auto m = buildZooModel("lenet", 16);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "replicate{devices=2}").ok());
  absl::Status s = runPipeline(*m, "autodiff");
  EXPECT_EQ(s.message(), "autodiff: run it before replicate (the module is already replicated)");
}

constexpr char kNoLoss[] = R"(module @noloss {
var @w : f32[4,8] {role=param, init=normal(std=0.01)}

graph @train_step(%x: f32[6,8]) {
  %w = param() {var=@w} : f32[4,8]
  %h = linear(%x, %w) : f32[6,4]
  return %h
}
}
)";

TEST(Autodiff, ModuleWithoutLossIsAnError) {
  auto m = ir::parseModule(kNoLoss);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status s = runPipeline(**m, "autodiff");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "autodiff: graph @train_step returns %h (linear): f32[6,4] first, but its first result "
            "is the loss it trains (a scalar f32)");
}

TEST(Autodiff, ModuleWithoutTrainStepIsAnError) {
  auto m = ir::parseModule("module @empty {\n}\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(runPipeline(**m, "autodiff").message(), "autodiff: the module has no @train_step");
}

// conv2d_relu_avg_pool (fuse-conv-relu-pool's op, written here by hand) differentiates into
// its filter gradient over its own mask; where its input would need a gradient (a second
// layer's), autodiff refuses, naming the node and the operand.
std::string convPoolModule(bool second_layer) {
  const std::string input = second_layer ? "%h" : "%x";
  return absl::StrCat(R"(module @first {
var @w : f32[2,1,3,3] {role=param, init=normal(std=0.1)}
var @v : f32[1,1,1,1] {role=param, init=normal(std=0.1)}
var @fc : f32[3,32] {role=param, init=normal(std=0.1)}

graph @train_step(%x: f32[2,1,10,10], %y: i32[2]) {
  %v = param() {var=@v} : f32[1,1,1,1]
  %h = conv2d(%x, %v) {stride=1, pad=0} : f32[2,1,10,10]
  %w = param() {var=@w} : f32[2,1,3,3]
  %p, %p.mask = conv2d_relu_avg_pool()",
                      input, R"(, %w) {stride=1, pad=0} : f32[2,2,4,4], i32[2,2,8]
  %flat = flatten(%p) : f32[2,32]
  %fc = param() {var=@fc} : f32[3,32]
  %logits = linear(%flat, %fc) : f32[2,3]
  %loss = softmax_cross_entropy(%logits, %y) {reduction=mean, divisor=2} : f32[]
  return %loss
}
}
)");
}

TEST(Autodiff, FusedConvReluPoolGivesItsFilterGradientOverItsMask) {
  auto m = ir::parseModule(convPoolModule(/*second_layer=*/false));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(runPipeline(**m, "autodiff").ok());
  const ir::Node* filter = nullptr;
  for (const auto& n : (*m)->graph("train_step")->nodes())
    if (n->op() == ir::Op::kConv2dReluAvgPoolBackwardFilter) filter = n.get();
  ASSERT_NE(filter, nullptr);
  EXPECT_EQ(filter->operand(3)->name(), "p.mask");
  EXPECT_EQ(filter->result(0)->name(), "w.grad");

  auto second = ir::parseModule(convPoolModule(/*second_layer=*/true));
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status s = runPipeline(**second, "autodiff");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              ::testing::AllOf(::testing::HasSubstr("%p (conv2d_relu_avg_pool)"),
                               ::testing::HasSubstr("has no gradient for its input x (%h")));
}

constexpr char kTwoLosses[] = R"(module @two {
var @w : f32[4,8] {role=param, init=normal(std=0.01)}

graph @train_step(%x: f32[6,8], %y: i32[6]) {
  %w = param() {var=@w} : f32[4,8]
  %h = linear(%x, %w) : f32[6,4]
  %a = softmax_cross_entropy(%h, %y) {reduction=mean, divisor=6} : f32[]
  %b = softmax_cross_entropy(%h, %y) {reduction=sum, divisor=1} : f32[]
  return %a, %b
}
}
)";

// The step's first result is the loss trained; a second loss op is a metric (Keras's
// metrics=["mae"] beside an MSE loss) and gets no gradient.
TEST(Autodiff, TheFirstResultIsTheLossAndOtherLossesAreMetrics) {
  auto m = ir::parseModule(kTwoLosses);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(runPipeline(**m, "autodiff").ok());
  const ir::Graph& g = *(*m)->graph("train_step");
  std::vector<std::string> backward;
  for (const auto& n : g.nodes())
    if (n->op() == ir::Op::kSoftmaxCrossEntropyBackward)
      backward.push_back(n->operands()[2]->name());  // dloss
  EXPECT_EQ(backward, std::vector<std::string>{"a.grad"});
  EXPECT_EQ(g.outputs()[0]->name(), "a");
  EXPECT_EQ(g.outputs()[1]->name(), "b");
}

// A value used twice gets the sum of both gradients: %h feeds two layers here.
constexpr char kFanOut[] = R"(module @fanout {
var @w : f32[8,8] {role=param, init=normal(std=0.01)}
var @v : f32[8,8] {role=param, init=normal(std=0.01)}
var @frozen : f32[8,8] {role=buffer, init=ones}

graph @train_step(%x: f32[6,8], %y: i32[6]) {
  %w = param() {var=@w} : f32[8,8]
  %h = linear(%x, %w) : f32[6,8]
  %v = param() {var=@v} : f32[8,8]
  %a = linear(%h, %v) : f32[6,8]
  %frozen = param() {var=@frozen} : f32[8,8]
  %b = linear(%h, %frozen) : f32[6,8]
  %s = add(%a, %b) : f32[6,8]
  %loss = softmax_cross_entropy(%s, %y) {reduction=mean, divisor=6} : f32[]
  return %loss
}
}
)";

TEST(Autodiff, GradientsOfAValueUsedTwiceAreSummed) {
  auto m = ir::parseModule(kFanOut);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(runPipeline(**m, "autodiff").ok());
  auto updates = updatesByVar(**m);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates.count("frozen"), 0u);
  // dW = linear_backward_weight(dh, x) where dh = add(dh from %a, dh from %b).
  const ir::Node* gw = updates.find("w")->second->operand(1)->def();
  ASSERT_EQ(gw->op(), ir::Op::kLinearBackwardWeight);
  EXPECT_EQ(gw->operand(0)->def()->op(), ir::Op::kAdd);
}

// The same variable read by two param nodes (weight sharing written out in text IR):
// its update must use the sum of both gradients, once.
constexpr char kSharedWeight[] = R"(module @shared {
var @w : f32[8,8] {role=param, init=normal(std=0.01)}

graph @train_step(%x: f32[6,8], %y: i32[6]) {
  %w = param() {var=@w} : f32[8,8]
  %h = linear(%x, %w) : f32[6,8]
  %w2 = param() {var=@w} : f32[8,8]
  %h2 = linear(%h, %w2) : f32[6,8]
  %loss = softmax_cross_entropy(%h2, %y) {reduction=mean, divisor=6} : f32[]
  return %loss
}
}
)";

TEST(Autodiff, VariableReadTwiceGetsOneUpdate) {
  auto m = ir::parseModule(kSharedWeight);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status s = runPipeline(**m, "autodiff");
  ASSERT_TRUE(s.ok()) << s;
  // One update, whose gradient sums what both reads of @w received.
  auto updates = updatesByVar(**m);
  ASSERT_EQ(updates.count("w"), 1u);
  const ir::Node* update = updates.find("w")->second;
  EXPECT_EQ(update->operand(1)->def()->op(), ir::Op::kAdd);
}

TEST(Autodiff, OptionsAreChecked) {
  EXPECT_EQ(passes::parsePipeline("autodiff{lr=0}").status().message(),
            "pass autodiff: option 'lr' must be > 0");
  EXPECT_EQ(passes::parsePipeline("autodiff{lr=inf}").status().message(),
            "pass autodiff: option 'lr' must be > 0");
  EXPECT_EQ(passes::parsePipeline("autodiff{momentum=1}").status().message(),
            "pass autodiff: option 'momentum' must be >= 0 and < 1");
  EXPECT_EQ(passes::parsePipeline("autodiff{weight-decay=-0.1}").status().message(),
            "pass autodiff: option 'weight-decay' must be >= 0 and <= 1");
  EXPECT_EQ(passes::parsePipeline("autodiff{weight-decay=inf}").status().message(),
            "pass autodiff: option 'weight-decay' must be >= 0 and <= 1");
  // The ranges `train` takes (issue 21: opt took weight-decay=2, which train refuses),
  // and values that f32, the update's arithmetic, rounds out of them.
  EXPECT_EQ(passes::parsePipeline("autodiff{weight-decay=2}").status().message(),
            "pass autodiff: option 'weight-decay' must be >= 0 and <= 1");
  EXPECT_EQ(passes::parsePipeline("autodiff{lr=1e-320}").status().message(),
            "pass autodiff: option 'lr' rounds to 0 in f32 (the update's arithmetic), which "
            "trains nothing; give at least 1.17549e-38");
  EXPECT_EQ(passes::parsePipeline("autodiff{momentum=0.99999999}").status().message(),
            "pass autodiff: option 'momentum' rounds to 1 in f32 (the update's arithmetic), "
            "which must be >= 0 and < 1");
  auto ok = passes::parsePipeline("autodiff{lr=0.5,momentum=0.9,weight-decay=0.001}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0]->optionsText(), "{lr=0.5,momentum=0.9,weight-decay=0.001}");
}

}  // namespace
}  // namespace tandem::testing
