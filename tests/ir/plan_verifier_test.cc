// The plan verifier: a correct plan of LeNet's step on two devices, corrupted one field at
// a time (a wait, a stream, an offset, an arena, the fingerprint, ...), must be refused
// with a message naming the nodes, values and bytes involved; and every plan the pipeline
// makes for the zoo, at device counts from 1 to 64, is accepted.

#include "ir/plan_verifier.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/plan.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "tests/device_kinds.h"
#include "tests/test_util.h"

namespace tandem::ir {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// LeNet on two devices with momentum and small buckets (several all_reduces, each with
// several tensors), planned by the default pipeline.
// On CUDA devices (target facts only: nothing runs) its kernels declare workspaces
// (backend/cuda/target_info.cc), which plan-memory plans.
std::unique_ptr<Module> plannedLenet(const char* kind = "cpu") {
  auto m = testing::buildZooModel("lenet", 64);
  passes::PipelineConfig config;
  config.devices = {{::tandem::testing::kind(kind), 0}, {::tandem::testing::kind(kind), 1}};
  config.optimizer = ir::SgdConfig{.momentum = 0.9};
  config.bucket_mb = 0.1;
  config.first_bucket_mb = 0.02;
  absl::Status s = testing::runPipeline(*m, passes::defaultPipeline(config));
  EXPECT_TRUE(s.ok()) << s;
  return m;
}

const Module& base() {
  static const Module* m = plannedLenet().release();
  return *m;
}

const Module& cudaBase() {
  static const Module* m = plannedLenet("cuda").release();
  return *m;
}

// One corruption of the base's @train_step plan.
struct Corruption {
  std::string name;
  std::function<void(Module&, Graph&, GraphPlan&)> corrupt;
  std::vector<std::string> expected;  // substrings of the verifier's message
  bool on_cuda = false;               // corrupts cudaBase(), whose kernels have workspaces
};

Node& nodeOf(Graph& g, const std::string& value) {
  Value* v = g.findValue(value);
  if (v == nullptr) {
    ADD_FAILURE() << "no value %" << value;
    std::abort();
  }
  return *v->def();
}

ValueRef refOf(Graph& g, const std::string& value) {
  Value* v = g.findValue(value);
  return {v->def()->id(), static_cast<uint32_t>(v->index())};
}

Node& firstNode(Graph& g, Op op, size_t skip = 0) {
  for (const auto& n : g.nodes())
    if (n->op() == op && skip-- == 0) return *n;
  ADD_FAILURE() << "no node of op " << opInfo(op).name;
  std::abort();
}

// Removes the wait for `value` from `node`'s plan.
void dropWait(Graph& g, GraphPlan& p, Node& node, const std::string& value) {
  auto& waits = p.of(node).waits;
  const ValueRef r = refOf(g, value);
  auto it = std::find(waits.begin(), waits.end(), r);
  ASSERT_NE(it, waits.end()) << node.describe() << " does not wait for %" << value;
  waits.erase(it);
}

// The value `node` waits for on its share of `device` (its first such wait).
std::string waitedOn(const Module& m, Graph& g, GraphPlan& p, Node& node, size_t device) {
  for (const ValueRef& r : p.of(node).waits)
    for (const auto& n : g.nodes())
      if (n->id() == r.node && deviceIndexOfValue(m, *n->result(r.result)) == device)
        return n->result(r.result)->name();
  ADD_FAILURE() << node.describe() << " has no wait on device " << device;
  return "";
}

// Plans `value` in `layout`, its node's other results plain.
void plan(GraphPlan& p, Graph& g, const std::string& value, ActivationLayout layout) {
  Node& n = nodeOf(g, value);
  p.of(n).layouts.assign(n.numResults(), ActivationLayout::kPlain);
  p.of(n).layouts[static_cast<size_t>(g.findValue(value)->index())] = layout;
}

std::vector<Corruption> corruptions() {
  return {
      // ---- events -------------------------------------------------------------------
      {"BucketStopsWaitingForItsGradients",
       [](Module& m, Graph& g, GraphPlan& p) {
         Node& reduce = firstNode(g, Op::kAllReduce);
         dropWait(g, p, reduce, waitedOn(m, g, p, reduce, 0));
       },
       {"(all_reduce)", "on cpu:0/comm, but", "writes it on cpu:0/compute",
        "no wait orders that before the read"}},
      {"UpdateStopsWaitingForItsSum",
       [](Module& m, Graph& g, GraphPlan& p) {
         Node& update = firstNode(g, Op::kSgdUpdate);
         dropWait(g, p, update, waitedOn(m, g, p, update, 0));
       },
       {"(sgd_update @cpu:0", ".sum.0 on cpu:0/compute, but", "(all_reduce)",
        "writes it on cpu:0/comm and no wait orders that before the read"}},
      {"FirstConvolutionStopsWaitingForTheSplit",
       [](Module&, Graph& g, GraphPlan& p) { dropWait(g, p, nodeOf(g, "pool1.1"), "x.1"); },
       {"%pool1.1 (conv2d_relu_avg_pool @cpu:1", "reads %x.1 on cpu:1/compute, but %x.0 (split)",
        "writes it on cpu:1/comm"}},
      {"BucketWaitsForAnEarlierGradientOnly",
       [](Module& m, Graph& g, GraphPlan& p) {
         Node& reduce = firstNode(g, Op::kAllReduce);
         const std::string last = waitedOn(m, g, p, reduce, 1);
         dropWait(g, p, reduce, last);
         p.of(reduce).waits.push_back(refOf(g, "pool1.1"));  // long before any gradient
       },
       {"(all_reduce)", "on cpu:1/comm, but", "no wait orders that before the read"}},
      {"WaitForALaterNode",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "pool1.0")).waits.push_back(refOf(g, "conv2.0"));
       },
       {"%pool1.0 (conv2d_relu_avg_pool @cpu:0",
        "waits for %conv2.0, which %conv2.0 (conv2d @cpu:0", "writes later"}},
      {"WaitOnItsOwnStream",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "conv2.0")).waits.push_back(refOf(g, "pool1.0"));
       },
       {"%conv2.0 (conv2d @cpu:0", "waits for %pool1.0 on its own stream cpu:0/compute"}},
      {"WaitForVariableStorage",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "pool1.0")).waits.push_back(refOf(g, "conv1.w.0"));
       },
       {"%pool1.0 (conv2d_relu_avg_pool @cpu:0", "waits for %conv1.w.0, which no stream writes"}},
      {"WaitForANodeNotInTheGraph",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "pool1.0")).waits.push_back({g.idBound() + 7, 0});
       },
       {"%pool1.0 (conv2d_relu_avg_pool @cpu:0", "which is not in the graph"}},
      // ---- streams ------------------------------------------------------------------
      {"PoolMovedToTheCommStream",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "pool2.0")).stream = StreamKind::kComm;
       },
       {"%pool2.0 (avg_pool2d @cpu:0", "reads %conv2.0 on cpu:0/comm, but %conv2.0 (conv2d @cpu:0",
        "writes it on cpu:0/compute and no wait orders that"}},
      {"NodeWithoutAStream",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "pool1.1")).stream.reset(); },
       {"%pool1.1 (conv2d_relu_avg_pool @cpu:1", "has no stream"}},
      {"VariableReadGetsAStream",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "conv1.w.0")).stream = StreamKind::kCompute;
       },
       {"%conv1.w.0 (param @cpu:0", "runs nowhere", "but has a plan"}},
      // ---- memory -------------------------------------------------------------------
      {"ResultOverItsOwnOperand",
       [](Module&, Graph& g, GraphPlan& p) {
         // fc1's relu: its operand %fc1.0 has no reader after it.
         p.of(nodeOf(g, "relu_2.0")).offsets[0] = p.of(nodeOf(g, "fc1.0")).offsets[0];
       },
       {"%relu_2.0 (relu @cpu:0", "writes %relu_2.0 over bytes [",
        "of cpu:0's arena, which hold %fc1.0 that it reads itself"}},
      {"ActivationReleasedBeforeItsBackwardReader",
       [](Module&, Graph& g, GraphPlan& p) {
         // pool1.0 is read again in backward; pool2.0 is made in forward, after it.
         p.of(nodeOf(g, "pool2.0")).offsets[0] = p.of(nodeOf(g, "pool1.0")).offsets[0];
       },
       {"%pool2.0 (avg_pool2d @cpu:0", "writes %pool2.0 over bytes [",
        "while %pool1.0 still has a reader after it:",
        "(the bytes are released before their last reader)"}},
      {"GradientTakenWhileTheCommStreamReducesIt",
       [](Module& m, Graph& g, GraphPlan& p) {
         // The gradient the first bucket waits for on cpu:0, and the next compute value
         // made after it: nothing orders that compute work with the bucket's reduction.
         Node& reduce = firstNode(g, Op::kAllReduce);
         const Value& grad = *g.findValue(waitedOn(m, g, p, reduce, 0));
         bool after = false;
         for (const auto& n : g.nodes()) {
           if (n.get() == grad.def()) {
             after = true;
             continue;
           }
           if (!after || n->numResults() == 0 || p.of(*n).stream != StreamKind::kCompute ||
               deviceIndexOfValue(m, *n->result(0)) != 0 || p.of(*n).offsets.empty() ||
               p.offset(grad) + n->result(0)->type().bytes() > p.arenas[0].bytes)
             continue;
           p.of(*n).offsets[0] = p.offset(grad);
           return;
         }
         ADD_FAILURE() << "no compute value after %" << grad.name();
       },
       {"may run at once (cpu:0/compute and cpu:0/comm, no event orders them) and touch bytes [",
        "the other reads %"}},
      {"SumWrittenOverALiveActivation",
       [](Module&, Graph& g, GraphPlan& p) {
         // The first bucket's sums on cpu:0 over pool1.0, which backward still reads.
         Node& reduce = firstNode(g, Op::kAllReduce);
         p.of(reduce).offsets[0] = p.of(nodeOf(g, "pool1.0")).offsets[0];
       },
       {"(all_reduce)", "bytes [", "of cpu:0's arena", "%pool1.0"}},
      {"TwoResultsOfOneNodeShareBytes",
       [](Module&, Graph& g, GraphPlan& p) {
         for (const auto& n : g.nodes())
           if (n->op() == Op::kAllReduce && n->numResults() >= 4) {
             p.of(*n).offsets[1] = p.of(*n).offsets[0];
             return;
           }
         ADD_FAILURE() << "no bucket of two tensors";
       },
       {"(all_reduce)", "its results %", "share bytes ["}},
      {"ReturnedLossOverwritten",
       [](Module&, Graph& g, GraphPlan& p) {
         // The correct count's sum is reduced after the loss's: it takes the loss's bytes.
         const Value& loss = *g.outputs()[0];
         const Value& correct = *g.outputs()[1];
         p.of(*correct.def()).offsets[static_cast<size_t>(correct.index())] = p.offset(loss);
       },
       {"writes %", "a value the graph returns (it must stay until the step ends)"}},
      {"MisalignedOffset",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "pool1.0")).offsets[0] += 4; },
       {"%pool1.0 (conv2d_relu_avg_pool @cpu:0", "is at offset",
        "not a multiple of the plan's alignment 64"}},
      {"OffsetPastTheArena",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "pool1.1")).offsets[0] = p.arenas[1].bytes;
       },
       {"%pool1.1 (conv2d_relu_avg_pool @cpu:1", "lies outside cpu:1's arena of"}},
      {"ArenaShrunk",
       [](Module&, Graph&, GraphPlan& p) { p.arenas[0].bytes = 4096; },
       {"lies outside cpu:0's arena of 4096 bytes"}},
      {"OffsetsMissing",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "conv2.1")).offsets.clear(); },
       {"%conv2.1 (conv2d @cpu:1", "has 0 offsets for 1 results"}},
      {"AnOffsetTooMany",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "conv2.1")).offsets.push_back(0); },
       {"%conv2.1 (conv2d @cpu:1", "has 2 offsets for 1 results"}},
      {"AlignmentNotAPowerOfTwo",
       [](Module&, Graph&, GraphPlan& p) { p.alignment = 48; },
       {"its alignment 48 is not a power of two"}},
      {"AnArenaMissing",
       [](Module&, Graph&, GraphPlan& p) { p.arenas.pop_back(); },
       {"it has 1 arenas for 2 devices"}},
      {"MemoryWithoutEvents",
       [](Module&, Graph&, GraphPlan& p) {
         p.parts &= static_cast<uint8_t>(~static_cast<uint8_t>(PlanPart::kEvents));
       },
       {"it has memory but no events"}},
      // ---- workspaces (on cuda devices) -----------------------------------------------
      {"WorkspaceTooSmall",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "conv1.0")).workspace->bytes = 256; },
       {"%conv1.0 (conv2d @cuda:0", "its kernel declares ",
        " bytes of workspace on cuda:0, the plan gives it 256"},
       true},
      {"WorkspaceMissing",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "fc1.0")).workspace.reset(); },
       {"%fc1.0 (linear @cuda:0", "bytes of workspace on cuda:0, the plan gives it 0"},
       true},
      {"WorkspaceOverItsOwnResult",
       [](Module&, Graph& g, GraphPlan& p) {
         NodePlan& conv2 = p.of(nodeOf(g, "conv2.0"));
         conv2.workspace->offset = conv2.offsets[0];
       },
       {"%conv2.0 (conv2d @cuda:0", "its workspace and its result %conv2.0 share bytes ["},
       true},
      {"WorkspaceOverALiveActivation",
       [](Module&, Graph& g, GraphPlan& p) {
         // %pool1.0 stays for conv2's backward; the arena grows so that only the overlap is
         // wrong.
         NodePlan& conv2 = p.of(nodeOf(g, "conv2.0"));
         conv2.workspace->offset = p.of(nodeOf(g, "pool1.0")).offsets[0];
         p.arenas[0].bytes =
             std::max(p.arenas[0].bytes, conv2.workspace->offset + conv2.workspace->bytes);
       },
       {"%conv2.0 (conv2d @cuda:0", "puts its workspace over bytes [",
        "while %pool1.0 still has a reader after it"},
       true},
      {"WorkspaceWhileTheCommStreamReducesAGradient",
       [](Module&, Graph& g, GraphPlan& p) {
         // The last backward kernel runs while the comm stream sums the first gradients.
         NodePlan& last = p.of(nodeOf(g, "conv1.w.grad.0"));
         last.workspace->offset = p.of(nodeOf(g, "fc2.w.grad.0")).offsets[0];
       },
       {"%conv1.w.grad.0 (conv2d_backward_filter @cuda:0",
        "may run at once (cuda:0/compute and "
        "cuda:0/comm, no event orders them)"},
       true},
      {"MisalignedWorkspace",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "fc2.0")).workspace->offset += 4; },
       {"%fc2.0 (linear @cuda:0", "its workspace is at offset",
        "not a multiple of the plan's alignment"},
       true},
      {"WorkspacePastTheArena",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "fc2.1")).workspace->offset = p.arenas[1].bytes - 256;
       },
       {"%fc2.1 (linear @cuda:1", "its workspace at [", "lies outside cuda:1's arena of"},
       true},
      {"WorkspaceOnACollective",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(firstNode(g, Op::kAllReduce)).workspace = WorkspacePlan{0, 256};
       },
       {"(all_reduce)", "runs on the comm stream but has a workspace"},
       true},
      // ---- layouts (on cuda devices: LeNet's first block is NHWC) ---------------------
      {"LayoutOnAnIneligibleValue",  // conv2's 50 f32 channels are not whole 16-byte vectors
       [](Module&, Graph& g, GraphPlan& p) {
         plan(p, g, "pool2.0", ActivationLayout::kChannelsLast);
       },
       {"%pool2.0 cannot be kept in nhwc: its type f32[", "is not one CUDA kernels take in it"},
       true},
      {"LayoutSplitAcrossLinkedSlots",
       [](Module&, Graph& g, GraphPlan& p) { p.of(nodeOf(g, "pool1.0")).layouts.clear(); },
       {"%pool1.0 (avg_pool2d @cuda:0",
        "result 0 %pool1.0 is nchw but operand 0 %conv1.0, which its "
        "kernel takes in the same layout, is nhwc"},
       true},
      {"LayoutOfAnotherTarget",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "conv1.0")).layouts = {ActivationLayout::kChannelBlocked};
       },
       {"%conv1.0 (conv2d @cuda:0", "%conv1.0 cannot be kept in nChw16c: CUDA devices keep nhwc"},
       true},
      {"LayoutInAPlainOnlySlot",  // conv2's dw is eligible, but the all_reduce takes NCHW
       [](Module&, Graph& g, GraphPlan& p) {
         plan(p, g, "conv2.w.grad.0", ActivationLayout::kChannelsLast);
       },
       {"(conv2d_backward_filter @cuda:0",
        "its kernel cannot take result 0 %conv2.w.grad.0 in "
        "nhwc (that slot takes only nchw)"},
       true},
      {"LayoutOnACollectiveResult",
       [](Module&, Graph& g, GraphPlan& p) {
         plan(p, g, "conv2.w.grad.sum.0", ActivationLayout::kChannelsLast);
       },
       {"(all_reduce)",
        "%conv2.w.grad.sum.0 cannot be kept in nhwc: collectives move plain "
        "tensors"},
       true},
      {"LayoutOnAVariable",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "conv2.w.0")).layouts = {ActivationLayout::kChannelsLast};
       },
       {"%conv2.w.0 (param @cuda:0", "runs nowhere (host data or variable storage) but has a plan"},
       true},
      {"LayoutsCountedWrong",
       [](Module&, Graph& g, GraphPlan& p) {
         p.of(nodeOf(g, "conv1.0")).layouts.push_back(ActivationLayout::kPlain);
       },
       {"%conv1.0 (conv2d @cuda:0", "it has 2 layouts for 1 results"},
       true},
      {"LayoutsWithoutTheirPart",
       [](Module&, Graph&, GraphPlan& p) {
         p.parts &= static_cast<uint8_t>(~static_cast<uint8_t>(PlanPart::kLayouts));
       },
       {"(conv2d @cuda:0", "has layouts but the plan has none"},
       true},
      // ---- staleness ----------------------------------------------------------------
      {"FingerprintOfAnotherGraph",
       [](Module&, Graph&, GraphPlan& p) { p.fingerprint ^= 1; },
       {"the plan of graph @train_step is stale: it was made for fingerprint"}},
      {"GraphRewrittenAfterPlanning",
       [](Module&, Graph& g, GraphPlan&) { firstNode(g, Op::kSgdUpdate).setAttr("lr", 0.25); },
       {"the plan of graph @train_step is stale", "run assign-streams and the plan passes"}},
  };
}

void PrintTo(const Corruption& c, std::ostream* os) { *os << c.name; }

class PlanCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(PlanCorruption, IsNamed) {
  const Corruption& c = GetParam();
  const Module& planned = c.on_cuda ? cudaBase() : base();
  ASSERT_TRUE(verifyModule(planned).ok()) << verifyModule(planned);
  std::unique_ptr<Module> m = planned.clone();
  Graph& g = *m->graph(kTrainGraph);
  c.corrupt(*m, g, *g.mutablePlan());
  absl::Status s = verifyModule(*m);
  ASSERT_FALSE(s.ok()) << c.name << ": the corrupted plan verified";
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  for (const std::string& part : c.expected) EXPECT_THAT(std::string(s.message()), HasSubstr(part));
  // The base plan is untouched: the clone's plan was copied before the corruption.
  EXPECT_TRUE(verifyModule(planned).ok());
}

INSTANTIATE_TEST_SUITE_P(Lenet2, PlanCorruption, ::testing::ValuesIn(corruptions()),
                         [](const auto& info) { return info.param.name; });

TEST(PlanCorruption, AtLeastTwentyKinds) { EXPECT_GE(corruptions().size(), 20u); }

// The fingerprint's one sweep (assign-streams' visit rides along) hashes operands by their
// definer's position, filled in as it goes. A graph out of order (the verifier refuses it,
// yet staleness is asked of it) must still tell which later node an operand names.
TEST(GraphFingerprint, VisitsEachNodeOnceAndTellsLaterDefiners) {
  const Graph& planned = *base().graph(kTrainGraph);
  std::vector<const Node*> visited;
  EXPECT_EQ(graphFingerprint(planned, [&](const Node& n) { visited.push_back(&n); }),
            graphFingerprint(planned));
  ASSERT_EQ(visited.size(), planned.numNodes());
  for (size_t i = 0; i < visited.size(); ++i) EXPECT_EQ(visited[i], planned.nodes()[i].get());

  // Operand 0 of the first node that has one, pointed at result 0 of one of two later nodes.
  auto rerouted = [](size_t from_end) {
    std::unique_ptr<Module> m = base().clone();
    Graph& g = *m->graph(kTrainGraph);
    Node* reader = nullptr;
    for (const auto& n : g.nodes())
      if (n->numOperands() > 0 && reader == nullptr) reader = n.get();
    std::vector<Node*> writers;
    for (const auto& n : g.nodes())
      if (n->numResults() > 0) writers.push_back(n.get());
    reader->setOperand(0, writers[writers.size() - from_end]->result(0));
    return graphFingerprint(g);
  };
  EXPECT_NE(rerouted(1), rerouted(2));
}

// ---- every plan the pipeline makes --------------------------------------------------

struct ZooPlanCase {
  std::string model;
  int devices;
  int64_t groups = 1;
  bool sync_bn = false;
  bool bf16 = false;
  std::string kind = "cpu";  // cuda: its kernels declare workspaces
};

void PrintTo(const ZooPlanCase& c, std::ostream* os) {
  *os << c.model << " x" << c.devices << (c.groups > 1 ? " groups" : "")
      << (c.sync_bn ? " sync-bn" : "") << (c.bf16 ? " bf16" : "") << " " << c.kind;
}

// Each zoo model at 1 and 64 devices and at two counts between, drawn with a fixed seed
// (so a failure reproduces; the draw is in the test's name), plus the hierarchical
// reduction, sync batch norm and mixed precision, whose collectives and casts differ; and
// on CUDA devices, whose convolutions and matrix products have workspaces.
std::vector<ZooPlanCase> zooPlanCases() {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> between(2, 63);
  std::vector<ZooPlanCase> out;
  for (const char* model : {"lenet", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"})
    for (int devices : {1, between(rng), between(rng), 64}) out.push_back({model, devices});
  out.push_back({"lenet", 64, 8});
  out.push_back({"resnet18", 8, 2, true});
  out.push_back({"resnet50", 6, 3, false, true});
  out.push_back({"resnet50", 8, 1, false, true, "cuda"});
  out.push_back({"resnet152", 2, 1, false, false, "cuda"});
  return out;
}

class ZooPlan : public ::testing::TestWithParam<ZooPlanCase> {};

TEST_P(ZooPlan, IsAccepted) {
  const ZooPlanCase& c = GetParam();
  // Two images per device (the ImageNet ResNets are shapes only here: nothing runs).
  auto m = testing::buildZooModel(c.model, 2 * c.devices);
  ASSERT_NE(m, nullptr);
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < c.devices; ++d)
    config.devices.push_back({::tandem::testing::kind(c.kind), d});
  config.optimizer = ir::SgdConfig{.momentum = 0.9};
  config.allreduce_groups = c.groups;
  config.sync_bn = c.sync_bn;
  config.bf16 = c.bf16;
  config.group_updates = c.devices % 2 == 0;  // both forms of the update
  // The verifier once, at the end (after every pass it would cost minutes at 64 devices).
  passes::PassManager pm({.verify = false});
  ASSERT_TRUE(pm.addPipeline(passes::defaultPipeline(config)).ok());
  ASSERT_TRUE(pm.run(*m).ok());
  for (const auto& g : m->graphs()) {
    ASSERT_NE(g->plan(), nullptr) << g->name();
    EXPECT_TRUE(g->plan()->has(PlanPart::kMemory)) << g->name();
  }
  if (c.kind == "cuda") {
    const Graph& step = *m->graph(kTrainGraph);
    EXPECT_TRUE(
        std::any_of(step.nodes().begin(), step.nodes().end(),
                    [&](const auto& n) { return step.plan()->of(*n).workspace.has_value(); }))
        << "no workspace planned on " << c.kind;
  }
  absl::Status s = verifyModule(*m);
  EXPECT_TRUE(s.ok()) << s;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooPlan, ::testing::ValuesIn(zooPlanCases()), [](const auto& info) {
  const ZooPlanCase& c = info.param;
  return absl::StrCat(c.model, "_", c.devices, "dev",
                      c.groups > 1 ? absl::StrCat("_groups", c.groups) : "",
                      c.sync_bn ? "_syncbn" : "", c.bf16 ? "_bf16" : "",
                      c.kind == "cpu" ? "" : absl::StrCat("_", c.kind));
});

}  // namespace
}  // namespace tandem::ir
