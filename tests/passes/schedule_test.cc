#include "passes/schedule.h"

#include "gtest/gtest.h"
#include "ir/placement.h"
#include "tests/passes/pass_test_util.h"

namespace tandem::testing {
namespace {

constexpr char kReplicated[] =
    "autodiff{lr=0.1},replicate{devices=[cpu:0,cpu:1]},insert-collectives{bucket-mb=0.05,"
    "first-bucket-mb=0.01},dce";

// Positions of a graph's nodes by pointer.
std::vector<const ir::Node*> order(const ir::Graph& g) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes()) out.push_back(n.get());
  return out;
}

TEST(Schedule, UpdatesMoveAfterEveryBackwardNode) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kReplicated).ok());
  ASSERT_TRUE(runPipeline(*m, "schedule").ok());
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  // The first sgd_update comes after the last compute node that does not wait for a
  // reduction (all of forward and backward on both devices).
  size_t first_update = SIZE_MAX, last_backward = 0;
  auto nodes = order(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]->op() == ir::Op::kSgdUpdate) first_update = std::min(first_update, i);
    if (nodes[i]->info().has(ir::kBackward)) last_backward = i;
  }
  ASSERT_NE(first_update, SIZE_MAX);
  EXPECT_GT(first_update, last_backward);
  // Several buckets, and each all_reduce still comes before the end of backward except
  // possibly the last one: that is what lets communication overlap computation.
  auto reduces = nodesWithOp(g, ir::Op::kAllReduce);
  ASSERT_GE(reduces.size(), 3u);
  size_t before_end = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->op() == ir::Op::kAllReduce && i < last_backward) ++before_end;
  EXPECT_GE(before_end, 2u);
}

TEST(Schedule, KeepsRelativeOrderWithinEachPart) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kReplicated).ok());
  auto before = order(*m->graph(ir::kTrainGraph));
  ASSERT_TRUE(runPipeline(*m, "schedule").ok());
  auto after = order(*m->graph(ir::kTrainGraph));
  ASSERT_EQ(before.size(), after.size());
  auto rank = [&](const std::vector<const ir::Node*>& v, const ir::Node* n) {
    return std::find(v.begin(), v.end(), n) - v.begin();
  };
  // Any two updates, and any two non-updates, keep their order.
  for (size_t i = 0; i + 1 < before.size(); ++i) {
    const ir::Node *a = before[i], *b = before[i + 1];
    bool a_up = a->op() == ir::Op::kSgdUpdate, b_up = b->op() == ir::Op::kSgdUpdate;
    if (a_up == b_up) {
      EXPECT_LT(rank(after, a), rank(after, b)) << a->describe();
    }
  }
}

TEST(Schedule, SecondRunChangesNothing) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kReplicated).ok());
  ASSERT_TRUE(runPipeline(*m, "schedule").ok());
  std::string once = canonical(*m);
  auto pass = passes::Schedule::create(*std::make_unique<passes::PassOptions>());
  ASSERT_TRUE(pass.ok());
  auto changed = (*pass)->run(*m);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(canonical(*m), once);
}

TEST(Schedule, RejectsOptions) {
  auto m = buildZooModel("lenet", 64);
  absl::Status s = runPipeline(*m, "schedule{x=1}");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::testing
