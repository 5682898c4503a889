#include "passes/plan_events.h"

#include <map>

#include "gtest/gtest.h"
#include "ir/plan.h"
#include "tests/passes/pass_test_util.h"

namespace tandem::testing {
namespace {

using ir::StreamKind;

constexpr char kPipeline[] =
    "autodiff{lr=0.1},replicate{devices=[cpu:0,cpu:1]},insert-collectives{bucket-mb=0.2,"
    "first-bucket-mb=0.05},dce,schedule,assign-streams,plan-events";

size_t position(const ir::Graph& g, const ir::Node* n) {
  for (size_t i = 0; i < g.numNodes(); ++i)
    if (g.nodes()[i].get() == n) return i;
  return SIZE_MAX;
}

// Each gradient bucket's comm share waits for exactly its own last gradient on that
// device (or nothing, when an earlier wait already covers it), never for the end of
// backward; and no wait repeats what an earlier one on the same pair of streams covered.
TEST(PlanEvents, BucketsWaitForTheirOwnLastGradient) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kPipeline).ok());
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  auto waits = ir::streamWaits(*m, g);
  ASSERT_FALSE(waits.empty());
  std::map<std::pair<size_t, size_t>, size_t> last;  // (at, from) stream -> producer position
  auto index = [](const ir::StreamSlot& s) {
    return s.device * 2 + (s.stream == StreamKind::kComm);
  };
  for (const ir::StreamWait& w : waits) {
    EXPECT_FALSE(w.at == w.from);
    auto key = std::make_pair(index(w.at), index(w.from));
    size_t p = position(g, w.producer);
    if (last.contains(key)) {
      EXPECT_GT(p, last[key]) << w.consumer->describe();
    }
    last[key] = p;
  }
  int bucket_waits = 0;
  for (const ir::Node* reduce : nodesWithOp(g, ir::Op::kAllReduce)) {
    for (size_t k = 0; k < 2; ++k) {
      size_t latest = 0;
      for (const ir::Value* v : ir::readsOf(*m, *reduce, k))
        latest = std::max(latest, position(g, v->def()));
      for (const ir::StreamWait& w : waits)
        if (w.consumer == reduce && w.at.device == k && w.at.stream == StreamKind::kComm) {
          ++bucket_waits;
          EXPECT_EQ(position(g, w.producer), latest) << reduce->describe();
          EXPECT_EQ(w.from.stream, StreamKind::kCompute);
        }
    }
  }
  EXPECT_GE(bucket_waits, 4);  // two gradient buckets on two devices
}

TEST(PlanEvents, ComputeWaitsForSplitsAndReductionsOnly) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kPipeline).ok());
  for (const ir::StreamWait& w : ir::streamWaits(*m, *m->graph(ir::kTrainGraph)))
    if (w.at.stream == StreamKind::kCompute) {
      EXPECT_TRUE(w.producer->op() == ir::Op::kSplit || w.producer->op() == ir::Op::kAllReduce)
          << w.producer->describe();
      EXPECT_EQ(w.from.device, w.at.device);
    }
}

TEST(PlanEvents, PrintedPerDeviceAndStream) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, kPipeline).ok());
  std::string text = ir::printStreams(*m, *m->graph(ir::kTrainGraph));
  for (const char* part :
       {"stream cpu:0/compute of @train_step:", "stream cpu:1/comm of @train_step:",
        "  all_reduce bucket 0\n", "    wait cpu:1/comm after split %x\n",
        "    wait cpu:0/compute after linear_backward_weight -> %fc1.w.grad.0\n"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

}  // namespace
}  // namespace tandem::testing
