// group-updates: what it groups (one device's updates of one bucket, or of a single
// device's whole step), what it leaves (updates alone in their bucket, updates that differ
// in hyperparameters), where the group goes, and the shape rule of sgd_update_group.
// The golden cases (golden_test.cc) show the text; training with and without it is
// compared bit for bit in tests/runtime/grouped_updates_test.cc.

#include "passes/group_updates.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/parser.h"
#include "ir/updates.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<passes::Pass> makeGroup() {
  passes::PassOptions opts("group-updates", {});
  auto p = passes::createPass("group-updates", opts);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

/// The variable a param node operand reads.
std::string varOf(const ir::Value* v) { return v->def()->symbolAttr("var"); }

TEST(GroupUpdates, Resnet18GetsOneGroupPerDeviceAndBucket) {
  auto m = buildZooModel("resnet18", 8);
  ASSERT_NE(m, nullptr);
  passes::PipelineConfig config;
  config.devices = {{::tandem::testing::kind("cuda"), 0}, {::tandem::testing::kind("cuda"), 1}};
  config.optimizer = ir::SgdConfig{.momentum = 0.9};
  config.bucket_mb = 8;
  config.group_updates = true;
  const std::string pipeline = passes::defaultPipeline(config);
  ASSERT_THAT(pipeline, HasSubstr(",schedule,group-updates,assign-streams,"));
  ASSERT_TRUE(runPipeline(*m, pipeline).ok());
  const ir::Graph& g = *m->graph(ir::kTrainGraph);

  // The gradient buckets (the all_reduces updates read) with their parameters per device.
  std::map<const ir::Node*, size_t> bucket_params;
  for (const auto& n : g.nodes())
    for (const ir::Value* grad : ir::updateGradients(*n))
      bucket_params[grad->def()] = grad->def()->numOperands() / 2;
  ASSERT_GE(bucket_params.size(), 3u);
  size_t multi = 0;  // buckets of two or more parameters
  for (const auto& [bucket, k] : bucket_params) multi += k > 1;

  // Every parameter is written once per device, by a group of its bucket.
  const size_t params = varsWithRole(*m, ir::VarRole::kParam).size();
  std::map<int, std::set<std::string>> written;  // device -> vars
  size_t groups = 0;
  for (const auto& n : g.nodes()) {
    if (!ir::isUpdate(n->op())) continue;
    std::vector<const ir::Value*> grads = ir::updateGradients(*n);
    const ir::Node* bucket = grads.front()->def();
    for (const ir::Value* grad : grads) EXPECT_EQ(grad->def(), bucket) << n->describe();
    if (n->op() == ir::Op::kSgdUpdateGroup) {
      ++groups;
      EXPECT_EQ(grads.size(), bucket_params[bucket]) << n->describe();
    } else {
      EXPECT_EQ(bucket_params[bucket], 1u) << n->describe() << " could have been grouped";
    }
    const ir::SgdGroupLayout layout =
        n->op() == ir::Op::kSgdUpdateGroup ? ir::sgdGroupLayout(*n) : ir::SgdGroupLayout{1, true};
    EXPECT_TRUE(layout.momentum);
    for (size_t j = 0; j < layout.k; ++j) {
      const int d = deviceNumber(*m, n->device());
      EXPECT_TRUE(written[d].insert(varOf(n->operand(layout.weight(j)))).second);
      EXPECT_EQ(varOf(n->operand(layout.buffer(j))),
                varOf(n->operand(layout.weight(j))) + ".momentum")
          << n->describe();
    }
  }
  ASSERT_EQ(written.size(), 2u);
  for (const auto& [d, vars] : written) EXPECT_EQ(vars.size(), params) << "device " << d;
  EXPECT_EQ(groups, 2 * multi);
  EXPECT_TRUE(ir::verifyModule(*m).ok()) << ir::verifyModule(*m);

  auto again = makeGroup()->run(*m);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "a second run finds nothing to group";
}

constexpr char kTwoLrs[] = R"(module @m {
var @a : f32[3] {role=param, init=zeros}
var @b : f32[3] {role=param, init=zeros}
var @c : f32[3] {role=param, init=zeros}

graph @train_step(%x: f32[3]) {
  %a = param() {var=@a} : f32[3]
  %b = param() {var=@b} : f32[3]
  %c = param() {var=@c} : f32[3]
  %ga = relu(%x) : f32[3]
  %gb = relu(%ga) : f32[3]
  %gc = relu(%gb) : f32[3]
  sgd_update(%a, %ga) {lr=0.1, momentum=0, weight_decay=0}
  sgd_update(%b, %gb) {lr=0.2, momentum=0, weight_decay=0}
  %after = relu(%gc) : f32[3]
  sgd_update(%c, %gc) {lr=0.1, momentum=0, weight_decay=0}
  return %after
}
}
)";

// @a and @c share lr and group at @c's place; @b's lr differs, so it stays alone.
TEST(GroupUpdates, GroupsOnlyEqualHyperparametersAtTheLastMember) {
  auto m = ir::parseModule(kTwoLrs, "two_lrs.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  auto changed = makeGroup()->run(**m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_THAT(canonical(**m),
              HasSubstr("  sgd_update(%b, %gb) {lr=0.2, momentum=0, weight_decay=0}\n"
                        "  %after = relu(%gc) : f32[3]\n"
                        "  sgd_update_group(%a, %c, %ga, %gc) {lr=0.1, momentum=0, "
                        "weight_decay=0}\n  return %after"));
  EXPECT_TRUE(ir::verifyModule(**m).ok());
}

std::string withUpdate(const std::string& update) {
  std::string s = kTwoLrs;
  const std::string from = "  sgd_update(%c, %gc) {lr=0.1, momentum=0, weight_decay=0}\n";
  s.replace(s.find(from), from.size(), update + "\n");
  return s;
}

TEST(GroupUpdates, ShapeRuleNamesTheOperandAtFault) {
  struct Case {
    std::string update, error;
  };
  for (const Case& c : std::vector<Case>{
           {"  sgd_update_group(%a, %c, %ga) {lr=0.1, momentum=0, weight_decay=0}",
            "3 operands are not 2 x k (k weights, their k gradients; no momentum buffers, as "
            "momentum is 0; then an optional lr_scale)"},
           {"  sgd_update_group(%a, %c, %ga, %gc) {lr=0.1, momentum=0.9, weight_decay=0}",
            "4 operands are not 3 x k (k weights, their k gradients and their k momentum "
            "buffers, as momentum > 0; then an optional lr_scale)"},
           {"  sgd_update_group(%a, %gb, %ga, %gc) {lr=0.1, momentum=0, weight_decay=0}",
            "weight 2 of 2 (%gb: f32[3]) must be read straight from a variable (a param node)"},
           {"  sgd_update_group(%a, %c, %ga, %gc) {lr=-1, momentum=0, weight_decay=0}",
            "lr must be >= 0"},
       }) {
    SCOPED_TRACE(c.update);
    auto m = ir::parseModule(withUpdate(c.update), "bad.tir");
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(m.status().message(), HasSubstr(c.error));
  }
}

// AdamW's updates group as SGD's do: five operand streams (weights, gradients, both
// moments, the counts), each parameter keeping its own count.
constexpr const char* kAdamw = R"(module @m {
var @a : f32[3] {role=param, init=zeros}
var @a.exp_avg : f32[3] {role=optimizer, init=zeros}
var @a.exp_avg_sq : f32[3] {role=optimizer, init=zeros}
var @a.step : f32[1] {role=optimizer, init=zeros}
var @c : f32[2] {role=param, init=zeros}
var @c.exp_avg : f32[2] {role=optimizer, init=zeros}
var @c.exp_avg_sq : f32[2] {role=optimizer, init=zeros}
var @c.step : f32[1] {role=optimizer, init=zeros}
graph @train_step() {
  %a = param() {var=@a} : f32[3]
  %am = param() {var=@a.exp_avg} : f32[3]
  %av = param() {var=@a.exp_avg_sq} : f32[3]
  %as = param() {var=@a.step} : f32[1]
  %c = param() {var=@c} : f32[2]
  %cm = param() {var=@c.exp_avg} : f32[2]
  %cv = param() {var=@c.exp_avg_sq} : f32[2]
  %cs = param() {var=@c.step} : f32[1]
  %ga = relu(%a) : f32[3]
  %gc = relu(%c) : f32[2]
  adamw_update(%a, %ga, %am, %av, %as) {lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.05}
  adamw_update(%c, %gc, %cm, %cv, %cs) {lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.05}
  return %ga
}
}
)";

TEST(GroupUpdates, AdamwGroupsWithBothMomentsAndEachCount) {
  auto m = ir::parseModule(kAdamw, "adamw.tir");
  ASSERT_TRUE(m.ok()) << m.status();
  auto changed = makeGroup()->run(**m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_THAT(canonical(**m),
              HasSubstr("  adamw_update_group(%a, %c, %ga, %gc, %am, %cm, %av, %cv, %as, %cs) "
                        "{lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.05}\n"));
  EXPECT_THAT(canonical(**m), Not(HasSubstr("adamw_update(")));
  EXPECT_TRUE(ir::verifyModule(**m).ok());
}

TEST(GroupUpdates, AdamwGroupShapeRuleNamesTheOperandAtFault) {
  struct Case {
    std::string update, error;
  };
  const std::string attrs = " {lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0}";
  for (const Case& c : std::vector<Case>{
           {"  adamw_update_group(%a, %c, %ga, %gc, %am, %cm, %av, %cv, %as)" + attrs,
            "9 operands are not 5 x k (k weights, their k gradients, k first moments, k second "
            "moments and k update counts; then an optional lr_scale)"},
           {"  adamw_update_group(%a, %c, %ga, %gc, %am, %cm, %av, %av, %as, %cs)" + attrs,
            "second moment 2 of 2 (%av: f32[3]) and weight 2 of 2 (%c: f32[2]) must have the "
            "same type"},
           {"  adamw_update_group(%a, %c, %ga, %gc, %am, %cm, %av, %cv, %as, %ga)" + attrs,
            "update count 2 of 2 (%ga: f32[3]) must be f32[1]"},
       }) {
    SCOPED_TRACE(c.update);
    std::string text = kAdamw;
    const size_t at = text.find("  adamw_update(%a");
    text.replace(at, text.find("  return %ga") - at, c.update + "\n");
    auto m = ir::parseModule(text, "bad.tir");
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(m.status().message(), HasSubstr(c.error));
  }
}

TEST(GroupUpdates, TakesNoOptions) {
  passes::PassOptions opts("group-updates", {{"max", "4"}});
  EXPECT_EQ(passes::createPass("group-updates", opts).status().message(),
            "pass group-updates has no option 'max' (it takes none)");
}

}  // namespace
}  // namespace tandem::testing
