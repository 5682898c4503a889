// dce: what it removes (unused results, whole dead chains) and what it must keep (graph
// inputs, nodes that write state even when nobody reads their results).

#include "passes/dce.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/verifier.h"
#include "passes/registry.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<passes::Pass> makeDce() {
  passes::PassOptions opts("dce", {});
  auto p = passes::createPass("dce", opts);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

std::vector<std::string> resultNames(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes())
    out.push_back(n->numResults() ? n->result()->name() : std::string(n->opName()));
  return out;
}

TEST(Dce, RemovesDeadNodesAndKeepsEffects) {
  auto m = parseGoldenInput("dce_input.tir");
  ASSERT_NE(m, nullptr);
  auto dce = makeDce();
  ASSERT_NE(dce, nullptr);
  auto changed = dce->run(*m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // %dead/%dead_too (a chain), the unread param and the unused constant go; the unused
  // input %extra stays (it is the signature) and so does batch_norm (it writes state).
  EXPECT_THAT(resultNames(*m->graph(ir::kTrainGraph)),
              ElementsAre("x", "y", "extra", "w", "h", "gamma", "beta", "mean", "var", "bn", "loss",
                          "correct"));
  // @init: an initialize nobody assigns is dead.
  EXPECT_EQ(nodesWithOp(*m->graph(ir::kInitGraph), ir::Op::kInitialize).size(), 5u);
  EXPECT_EQ(m->graph(ir::kEvalGraph)->numNodes(), 6u);
  EXPECT_TRUE(ir::verifyModule(*m).ok());

  auto again = dce->run(*m);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "a second run finds nothing";
}

TEST(Dce, DefaultPipelineLeavesNothingDead) {
  auto m = buildZooModel("resnet18", 8);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff,replicate{devices=2},insert-collectives").ok());
  size_t before = 0;
  for (const auto& g : m->graphs()) before += g->numNodes();
  auto dce = makeDce();
  ASSERT_NE(dce, nullptr);
  auto changed = dce->run(*m);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  size_t after = 0;
  for (const auto& g : m->graphs()) after += g->numNodes();
  EXPECT_EQ(after, before);
}

TEST(Dce, TakesNoOptions) {
  passes::PassOptions opts("dce", {{"aggressive", "1"}});
  EXPECT_EQ(passes::createPass("dce", opts).status().message(),
            "pass dce has no option 'aggressive' (it takes none)");
}

}  // namespace
}  // namespace tandem::testing
