#include "passes/plan_memory.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/op_info.h"
#include "ir/placement.h"
#include "ir/plan.h"
#include "tests/passes/pass_test_util.h"

namespace tandem::testing {
namespace {

// The training pipeline up to and with `plan_memory`.
std::string pipeline(absl::string_view plan_memory = "plan-memory") {
  return absl::StrCat(
      "autodiff{lr=0.1},replicate{devices=[cpu:0,cpu:1]},insert-collectives{bucket-mb=0.05,"
      "first-bucket-mb=0.01},dce,schedule,assign-streams,plan-events,",
      plan_memory);
}

struct Placed {
  const ir::Value* value;
  size_t device;
  int64_t offset, bytes;
  int64_t def, last_use;  // positions
  std::vector<const ir::Value*> views;  // views planned into these bytes (plan-memory)
};

// Every arena buffer with its offset and its plain (compute-order) lifetime: a value's,
// with the views given its bytes (a reshape at its operand's offset) folded in, their
// readers its readers.
std::vector<Placed> placed(const ir::Module& m, const ir::Graph& g) {
  const ir::GraphPlan& plan = *g.plan();
  std::vector<int64_t> pos(g.idBound());
  for (size_t i = 0; i < g.numNodes(); ++i) pos[g.nodes()[i]->id()] = static_cast<int64_t>(i);
  auto users = g.users();
  auto lastUse = [&](const ir::Value* v, int64_t from) {
    if (auto it = users.find(v); it != users.end())
      for (const ir::Node* u : it->second) from = std::max(from, pos[u->id()]);
    return from;
  };
  std::vector<Placed> out;
  absl::flat_hash_map<const ir::Value*, size_t> buffer_of;
  for (const auto& n : g.nodes())
    for (size_t r = 0; r < n->numResults(); ++r) {
      int64_t off = plan.offset(*n->result(r));
      if (off == ir::GraphPlan::kNoOffset) continue;
      const ir::Value* v = n->result(r);
      if (ir::isView(n->op()) && plan.offset(*n->operand(0)) == off) {
        const size_t b = buffer_of.at(n->operand(0));
        out[b].last_use = lastUse(v, out[b].last_use);
        out[b].views.push_back(v);
        buffer_of[v] = b;
        continue;
      }
      buffer_of[v] = out.size();
      out.push_back({v, *m.deviceIndex(ir::deviceOfValue(*v)), off, v->type().bytes(), pos[n->id()],
                     lastUse(v, pos[n->id()])});
    }
  return out;
}

bool overlapsInMemory(const Placed& a, const Placed& b) {
  return a.device == b.device && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

TEST(PlanMemory, EveryArenaValueIsPlacedInsideItsArena) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, pipeline()).ok());
  for (const auto& g : m->graphs()) {
    ASSERT_NE(g->plan(), nullptr) << g->name();
    const ir::GraphPlan& plan = *g->plan();
    for (const Placed& p : placed(*m, *g)) {
      EXPECT_EQ(p.offset % 64, 0) << p.value->name();
      EXPECT_LE(p.offset + p.bytes, plan.arenas[p.device].bytes) << p.value->name();
    }
    for (const auto& n : g->nodes()) {
      bool host_or_var = ir::isSource(n->op());
      for (size_t r = 0; r < n->numResults(); ++r)
        EXPECT_EQ(plan.offset(*n->result(r)) == ir::GraphPlan::kNoOffset, host_or_var)
            << n->result(r)->name();
    }
  }
}

TEST(PlanMemory, ValuesLiveTogetherNeverShareBytes) {
  for (const char* model : {"lenet", "resnet18", "vit"}) {
    auto m = buildZooModel(model, 16);
    ASSERT_TRUE(runPipeline(*m, pipeline()).ok());
    for (const auto& g : m->graphs()) {
      auto values = placed(*m, *g);
      for (size_t i = 0; i < values.size(); ++i)
        for (size_t j = i + 1; j < values.size(); ++j) {
          const Placed &a = values[i], &b = values[j];
          bool live_together = a.def <= b.last_use && b.def <= a.last_use;
          EXPECT_FALSE(live_together && overlapsInMemory(a, b))
              << model << " @" << g->name() << ": %" << a.value->name() << " and %"
              << b.value->name();
        }
    }
  }
}

// A gradient the comm stream reduces may still be read after the compute stream has
// moved on, so nothing computed before the first update may take its bytes.
TEST(PlanMemory, ReducedGradientsStayLiveUntilTheUpdatesWait) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, pipeline()).ok());
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  auto values = placed(*m, g);
  int64_t first_update = 0;
  for (size_t i = 0; i < g.numNodes(); ++i)
    if (g.nodes()[i]->op() == ir::Op::kSgdUpdate) {
      first_update = static_cast<int64_t>(i);
      break;
    }
  int checked = 0;
  for (const Placed& grad : values) {
    auto users = g.users();
    bool reduced = false;
    for (const ir::Node* u : users[grad.value]) reduced |= u->op() == ir::Op::kAllReduce;
    if (!reduced) continue;
    ++checked;
    for (const Placed& other : values) {
      if (other.def > grad.def && other.def < first_update) {
        EXPECT_FALSE(overlapsInMemory(grad, other))
            << "%" << grad.value->name() << " shares bytes with %" << other.value->name();
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Every reshape and flatten of an arena value takes its operand's bytes (folded into the
// operand's buffer above, which then lives until the view's last reader), and with
// views=copy none does. Sharing never makes the arena larger.
TEST(PlanMemory, ViewsTakeTheirOperandsBytes) {
  auto plannedViews = [](const char* model, absl::string_view plan_memory, size_t& views,
                         size_t& shared, int64_t& arena) {
    auto m = buildZooModel(model, 16);
    ASSERT_TRUE(runPipeline(*m, pipeline(plan_memory)).ok());
    const ir::Graph& g = *m->graph(ir::kTrainGraph);
    views = shared = 0;
    for (const auto& n : g.nodes()) {
      if (!ir::isView(n->op()) || ir::isSource(n->operand(0)->def()->op())) continue;
      ++views;
      shared += g.plan()->offset(*n->result(0)) == g.plan()->offset(*n->operand(0));
    }
    size_t folded = 0;
    for (const Placed& p : placed(*m, g)) folded += p.views.size();
    EXPECT_EQ(folded, shared);
    arena = g.plan()->arenas[0].bytes;
  };
  for (const char* model : {"vit", "lenet"}) {
    SCOPED_TRACE(model);
    size_t views = 0, shared = 0, copied_views = 0, copied_shared = 0;
    int64_t arena = 0, copied_arena = 0;
    plannedViews(model, "plan-memory", views, shared, arena);
    plannedViews(model, "plan-memory{views=copy}", copied_views, copied_shared, copied_arena);
    EXPECT_GT(views, 0u);
    EXPECT_EQ(shared, views);
    EXPECT_EQ(copied_views, views);
    EXPECT_EQ(copied_shared, 0u);
    EXPECT_LE(arena, copied_arena);
  }
}

TEST(PlanMemory, ReuseMakesTheArenaSmallerThanTheSumOfItsValues) {
  auto m = buildZooModel("resnet18", 32);
  ASSERT_TRUE(runPipeline(*m, pipeline()).ok());
  const ir::GraphPlan& plan = *m->graph(ir::kTrainGraph)->plan();
  ASSERT_EQ(plan.arenas.size(), 2u);
  for (const ir::ArenaPlan& a : plan.arenas) {
    EXPECT_GE(a.bytes, a.live_peak_bytes);
    EXPECT_LT(a.bytes, a.unshared_bytes / 2);
    // Fragmentation stays modest: within 25% of what is live at the peak.
    EXPECT_LE(a.bytes, a.live_peak_bytes * 5 / 4);
  }
}

TEST(PlanMemory, AnyRewriteDropsThePlan) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_TRUE(runPipeline(*m, pipeline()).ok());
  ASSERT_NE(m->graph(ir::kEvalGraph)->plan(), nullptr);
  auto clone = m->clone();
  EXPECT_NE(clone->graph(ir::kEvalGraph)->plan(), nullptr);
  ASSERT_TRUE(runPipeline(*m, "dce").ok());  // eraseIf runs even when nothing dies
  m->graph(ir::kEvalGraph)->eraseIf([](const ir::Node&) { return false; });
  EXPECT_EQ(m->graph(ir::kEvalGraph)->plan(), nullptr);
}

// Not a timing test: planMemory counts its steps, and per node, operand and result they
// must stay flat as the device count grows 64-fold. (Each result of a collective once
// rescanned all the collective's operands, O(k^2 D^2) for an all_reduce of k tensors on
// D devices, and lenet on 1024 devices took 13 s in this pass.)
TEST(PlanMemory, WorkGrowsWithTheGraphNotWithDevicesSquared) {
  double first_ratio = 0;
  for (int devices : {8, 64, 512}) {
    auto m = buildZooModel("lenet", 512);
    ASSERT_TRUE(runPipeline(*m, absl::StrCat("autodiff{lr=0.1},replicate{devices=", devices,
                                             "},insert-collectives,dce,schedule,assign-streams,"
                                             "plan-events"))
                    .ok());
    int64_t size = 0;
    passes::PlanMemoryWork work;
    for (const auto& g : m->graphs()) {
      for (const auto& n : g->nodes())
        size += static_cast<int64_t>(1 + n->numOperands() + n->numResults());
      ASSERT_TRUE(passes::planMemory(*m, *g, *g->mutablePlan(), &work).ok());
    }
    double ratio = static_cast<double>(work.steps) / static_cast<double>(size);
    if (first_ratio == 0) first_ratio = ratio;
    EXPECT_LE(ratio, 5.0) << devices << " devices";  // 3.7 when written
    EXPECT_LE(ratio, first_ratio * 1.1) << devices << " devices: steps per node, operand and "
                                        << "result grew from " << first_ratio << " to " << ratio;
  }
}

}  // namespace
}  // namespace tandem::testing
