// What the op spec (ir/ops.td) gives besides the table: typed views and creators, the
// attribute ranges the verifier checks, the optimizer and collective interfaces passes
// and the runtime ask, and the cost-model entries.

#include "ir/interfaces.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/op_cost.h"
#include "ir/op_views.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace tandem::ir {
namespace {

using ::testing::HasSubstr;

constexpr char kModule[] = R"(module @m devices=[cpu:0, cpu:1, cpu:2, cpu:3] {
var @w : f32[3] {role=param, init=zeros}
var @w.momentum : f32[3] {role=optimizer, init=zeros}
var @v : f32[3] {role=param, init=zeros}

graph @train_step() {
  %p.0 = param() {var=@w} @cpu:0 : f32[3]
  %p.1 = param() {var=@w} @cpu:1 : f32[3]
  %p.2 = param() {var=@w} @cpu:2 : f32[3]
  %p.3 = param() {var=@w} @cpu:3 : f32[3]
  %m.0 = param() {var=@w.momentum} @cpu:0 : f32[3]
  %q.0 = param() {var=@v} @cpu:0 : f32[3]
  %g.0 = relu(%p.0) @cpu:0 : f32[3]
  %g.1 = relu(%p.1) @cpu:1 : f32[3]
  %g.2 = relu(%p.2) @cpu:2 : f32[3]
  %g.3 = relu(%p.3) @cpu:3 : f32[3]
  %h.0 = relu(%q.0) @cpu:0 : f32[3]
  %s.0, %s.1, %s.2, %s.3 = all_reduce(%g.0, %g.1, %g.2, %g.3) {op=sum, bucket=0, devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[3], f32[3], f32[3], f32[3]
  %t.0, %t.2 = all_reduce(%s.0, %s.2) {op=sum, bucket=0, devices=[cpu:0, cpu:2]} : f32[3], f32[3]
  %u.0, %u.1, %u.2, %u.3 = broadcast(%t.0, %t.2) {devices=[cpu:0, cpu:1, cpu:2, cpu:3], groups=2} : f32[3], f32[3], f32[3], f32[3]
  sgd_update(%p.0, %u.0, %m.0) {lr=0.1, momentum=0.9, weight_decay=0} @cpu:0
  sgd_update_group(%p.1, %q.0, %u.1, %h.0) {lr=0.1, momentum=0, weight_decay=0} @cpu:1
  return %u.0
}
}
)";

const Node& nodeDefining(const Module& m, absl::string_view value) {
  return *m.graph(kTrainGraph)->findValue(value)->def();
}

const Node& nthOf(const Module& m, Op op, int n) {
  for (const auto& node : m.graph(kTrainGraph)->nodes())
    if (node->op() == op && n-- == 0) return *node;
  ADD_FAILURE() << "no such node";
  std::abort();
}

TEST(OpViews, NameOperandsResultsAndAttributes) {
  auto m = parseModule(kModule, "m.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  const AllReduceView flat(nodeDefining(**m, "t.0"));
  EXPECT_EQ(flat.op(), ReduceOp::kSum);
  EXPECT_EQ(flat.bucket(), 0);
  EXPECT_EQ(flat.groups(), 1);  // the default
  EXPECT_EQ(flat.xs().size(), 2u);
  EXPECT_EQ(flat.numYs(), 2u);
  const SgdUpdateView sgd(nthOf(**m, Op::kSgdUpdate, 0));
  EXPECT_EQ(sgd.w()->name(), "p.0");
  ASSERT_NE(sgd.m(), nullptr);
  EXPECT_EQ(sgd.m()->name(), "m.0");
  EXPECT_DOUBLE_EQ(sgd.momentum(), 0.9);
  EXPECT_DOUBLE_EQ(attr::lr(sgd.node()), 0.1);
  const ReluView relu(nodeDefining(**m, "g.0"));
  EXPECT_EQ(relu.x()->name(), "p.0");
  EXPECT_EQ(relu.y()->name(), "g.0");
  EXPECT_EQ(SgdUpdateView::kG, 1u);
}

TEST(OpViews, AnOptionalOperandInTheMiddleMovesTheOnesAfterIt) {
  Module m("fold");
  Graph* g = *m.addGraph("eval_step");
  auto input = [&](const char* name, Shape shape) {
    return (*g->create(
                InputArgs{}.spec({.names = {name}, .declared_types = {{DType::kF32, shape}}})))
        ->result();
  };
  Value *w = input("w", {2, 1, 3, 3}), *b = input("b", {2}), *gamma = input("gamma", {2}),
        *beta = input("beta", {2}), *mean = input("mean", {2}), *var = input("var", {2});
  for (Value* bias : {b, static_cast<Value*>(nullptr)}) {
    auto fold = g->create(FoldBatchNormArgs{.w = w,
                                            .b = bias,
                                            .gamma = gamma,
                                            .beta = beta,
                                            .running_mean = mean,
                                            .running_var = var,
                                            .eps = 1e-5}
                              .spec());
    ASSERT_TRUE(fold.ok()) << fold.status();
    const FoldBatchNormView v(**fold);
    EXPECT_EQ(v.b(), bias);
    EXPECT_EQ(v.gamma(), gamma);
    EXPECT_EQ(v.running_var(), var);
  }
}

TEST(OpViews, DeclaredRangesAreCheckedBeforeTheShapeRule) {
  Module m("ranges");
  Graph* g = *m.addGraph("train_step");
  Value* x = (*g->create(InputArgs{}.spec(
                  {.names = {"x"}, .declared_types = {{DType::kF32, {1, 1, 4, 4}}}})))
                 ->result();
  Value* w = (*g->create(InputArgs{}.spec(
                  {.names = {"w"}, .declared_types = {{DType::kF32, {1, 1, 3, 3}}}})))
                 ->result();
  auto conv = g->create(Conv2dArgs{.x = x, .w = w, .stride = 0, .pad = 0}.spec({.names = {"y"}}));
  ASSERT_FALSE(conv.ok());
  EXPECT_THAT(conv.status().message(), HasSubstr("%y (conv2d): stride must be >= 1"));
  auto pool = g->create(MaxPool2dArgs{.x = x, .kernel = 2, .stride = 2, .pad = -1}.spec());
  ASSERT_FALSE(pool.ok());
  EXPECT_THAT(pool.status().message(), HasSubstr("pad must be >= 0"));
  EXPECT_TRUE(g->create(Conv2dArgs{.x = x, .w = w, .stride = 1, .pad = 1}.spec()).ok());
}

TEST(UpdateView, SingleAndGroupedFormsNameWeightGradientAndState) {
  auto m = parseModule(kModule, "m.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  const UpdateView one = *UpdateView::of(nthOf(**m, Op::kSgdUpdate, 0));
  EXPECT_FALSE(one.grouped());
  EXPECT_EQ(one.numParams(), 1u);
  EXPECT_EQ(one.param(0)->name(), "p.0");
  EXPECT_EQ(one.grad(0)->name(), "u.0");
  ASSERT_EQ(one.presentStates().size(), 1u);  // momentum > 0
  EXPECT_EQ(one.stateOperand(0, 0), 2u);
  EXPECT_EQ(one.info().states[0].var_suffix, "momentum");
  EXPECT_EQ(one.info().states[0].init, Initializer::Kind::kZeros);
  EXPECT_EQ(one.info().grouped, Op::kSgdUpdateGroup);
  const UpdateView two = *UpdateView::of(nthOf(**m, Op::kSgdUpdateGroup, 0));
  EXPECT_TRUE(two.grouped());
  EXPECT_EQ(two.numParams(), 2u);  // momentum 0: weights and gradients only
  EXPECT_TRUE(two.presentStates().empty());
  EXPECT_EQ(two.param(1)->name(), "q.0");
  EXPECT_EQ(two.grad(1)->name(), "h.0");
  EXPECT_EQ(updateGradients(two.node()).size(), 2u);
  EXPECT_FALSE(UpdateView::of(nodeDefining(**m, "g.0")).has_value());
}

TEST(CollectiveView, WhatEachDeviceReadsAndWrites) {
  auto m = parseModule(kModule, "m.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  const CollectiveView grouped(nodeDefining(**m, "s.0"));
  EXPECT_EQ(grouped.kind(), CollectiveKind::kReduce);
  EXPECT_EQ(grouped.call(), CollectiveCall::kAllReduce);
  EXPECT_EQ(grouped.numGroups(), 2);
  EXPECT_EQ(grouped.groupOf(3), 1u);
  EXPECT_EQ(grouped.readsAt(2).begin, 2u);
  EXPECT_EQ(grouped.writesAt(3).begin, 3u);
  const CollectiveView bcast(nodeDefining(**m, "u.0"));
  EXPECT_EQ(bcast.kind(), CollectiveKind::kBroadcast);
  EXPECT_EQ(bcast.readsAt(1).begin, 0u);  // group 0's source
  EXPECT_EQ(bcast.readsAt(2).begin, 1u);  // group 1's
  EXPECT_EQ(bcast.positionOfResult(2), 2u);
  EXPECT_EQ(collectiveKind(nodeDefining(**m, "g.0")), std::nullopt);
}

TEST(OpCost, FormulasOfTheSpec) {
  Module m("cost");
  Graph* g = *m.addGraph("train_step");
  Value* x = (*g->create(InputArgs{}.spec(
                  {.names = {"x"}, .declared_types = {{DType::kF32, {2, 3, 8, 8}}}})))
                 ->result();
  Value* w = (*g->create(InputArgs{}.spec(
                  {.names = {"w"}, .declared_types = {{DType::kF32, {4, 3, 3, 3}}}})))
                 ->result();
  Node* conv = *g->create(Conv2dArgs{.x = x, .w = w, .stride = 1, .pad = 1}.spec());
  // 2 * (2*4*8*8 outputs) * (3*3*3 filter elements per output channel)
  EXPECT_DOUBLE_EQ(opWork(*conv).flops, 2.0 * 512 * 27);
  Node* relu = *g->create(ReluArgs{.x = conv->result()}.spec());
  EXPECT_DOUBLE_EQ(opWork(*relu).flops, 512);
  EXPECT_DOUBLE_EQ(opWork(*relu).bytes, 2 * 512 * 4);
  EXPECT_DOUBLE_EQ(opWork(*x->def()).bytes, 0);  // graph inputs do no work
  // A reduction counts a flop per element it reads, not per (smaller) result.
  Node* sum = *g->create(ReduceSumArgs{.x = relu->result(), .axis = 1}.spec());
  EXPECT_DOUBLE_EQ(opWork(*sum).flops, 512);
  EXPECT_DOUBLE_EQ(opWork(*sum).bytes, 512 * 4 + 128 * 4);
  for (const OpInfo& info : allOps()) EXPECT_NE(info.cost.flops, nullptr) << info.name;
}

}  // namespace
}  // namespace tandem::ir
