// insert-collectives after autodiff and replicate, on LeNet and ResNet-18 over 1 to 8
// devices: gradient buckets (checked against an independent DDP-style bucketing), their
// placement and numbering, the batch splits, the init broadcasts and the summed outputs.

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr int64_t kMiB = int64_t{1} << 20;

/// A gradient as autodiff leaves it: which variable, how many bytes per device.
struct Gradient {
  std::string var;
  int64_t bytes;
};

/// The gradients of an autodiff-only module in the order backward produces them: by the
/// position of the node that computes each, then by result index (a node giving dw and
/// db makes dw first).
std::vector<Gradient> gradientsInReadyOrder(const ir::Module& m) {
  const ir::Graph& g = *m.graph(ir::kTrainGraph);
  auto pos = g.positions();
  std::vector<std::tuple<size_t, int, Gradient>> keyed;
  for (const ir::Node* u : nodesWithOp(g, ir::Op::kSgdUpdate)) {
    const ir::Value* grad = u->operand(1);
    keyed.emplace_back(pos.at(grad->def()), grad->index(),
                       Gradient{updatedVar(*u), grad->type().bytes()});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<Gradient> out;
  for (auto& k : keyed) out.push_back(std::get<2>(k));
  return out;
}

/// The DDP rule, written independently of the pass: fill buckets in readiness order; a
/// bucket closes as soon as its bytes reach the cap (first_cap for the first bucket, cap
/// after); whatever is left at the end is the last bucket.
std::vector<std::vector<std::string>> ddpBuckets(const std::vector<Gradient>& grads,
                                                 int64_t first_cap, int64_t cap) {
  std::vector<std::vector<std::string>> buckets;
  std::vector<std::string> open;
  int64_t bytes = 0;
  for (const Gradient& g : grads) {
    open.push_back(g.var);
    bytes += g.bytes;
    if (bytes >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(open));
      open.clear();
      bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

/// Users of every value of a graph.
using Users = absl::flat_hash_map<const ir::Value*, std::vector<ir::Node*>>;

/// The sgd_update that takes `v` as its gradient, or null.
const ir::Node* updateUsing(const Users& users, const ir::Value* v) {
  auto it = users.find(v);
  if (it == users.end()) return nullptr;
  for (const ir::Node* n : it->second)
    if (n->op() == ir::Op::kSgdUpdate && n->operand(1) == v) return n;
  return nullptr;
}

/// True when some result of the all_reduce is a gradient that feeds an update.
bool isGradientBucket(const Users& users, const ir::Node& ar) {
  for (size_t r = 0; r < ar.numResults(); ++r)
    if (updateUsing(users, ar.result(r)) != nullptr) return true;
  return false;
}

/// The global batch split `batch` over `devices` evenly, remainder to the first ones.
std::vector<int64_t> evenSplit(int64_t batch, int devices) {
  std::vector<int64_t> out;
  for (int d = 0; d < devices; ++d) out.push_back(batch / devices + (d < batch % devices ? 1 : 0));
  return out;
}

struct Case {
  std::string model;
  int devices;
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  std::string tag;  // test name suffix for non-default caps
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " on " << c.devices << " devices, buckets " << c.first_bucket_mb << "/"
      << c.bucket_mb << " MiB";
}

std::string caseName(const Case& c) {
  return absl::StrCat(c.model, "_on", c.devices, c.tag.empty() ? "" : "_", c.tag);
}

constexpr int64_t kBatch = 256;

class CollectivesTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    m_ = buildZooModel(c.model, kBatch);
    ASSERT_NE(m_, nullptr);
    ASSERT_TRUE(runPipeline(*m_, "autodiff").ok());
    ready_ = gradientsInReadyOrder(*m_);
    params_ = varsWithRole(*m_, ir::VarRole::kParam);
    passes::PipelineConfig config;
    config.devices.clear();
    for (int d = 0; d < c.devices; ++d)
      config.devices.push_back({::tandem::testing::kind("cpu"), d});
    config.bucket_mb = c.bucket_mb;
    config.first_bucket_mb = c.first_bucket_mb;
    // The rest of the default pipeline, after its autodiff.
    std::string pipeline = passes::defaultPipeline(config);
    pipeline = pipeline.substr(pipeline.find("replicate"));
    absl::Status s = runPipeline(*m_, pipeline);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(m_->devices().size(), static_cast<size_t>(c.devices));
  }

  const ir::Graph& train() const { return *m_->graph(ir::kTrainGraph); }

  std::unique_ptr<ir::Module> m_;
  std::vector<Gradient> ready_;
  std::vector<std::string> params_;
};

TEST_P(CollectivesTest, EveryDeviceReducesEveryGradientOnce) {
  if (GetParam().devices == 1) {
    // Nothing to communicate: updates take backward's gradients directly.
    for (const auto& g : m_->graphs()) {
      EXPECT_TRUE(nodesWithOp(*g, ir::Op::kAllReduce).empty()) << "@" << g->name();
      EXPECT_TRUE(nodesWithOp(*g, ir::Op::kBroadcast).empty()) << "@" << g->name();
    }
    auto updates = nodesWithOp(train(), ir::Op::kSgdUpdate);
    EXPECT_EQ(updates.size(), params_.size());
    for (const ir::Node* u : updates)
      EXPECT_TRUE(u->operand(1)->def()->info().has(ir::kBackward)) << u->describe();
    return;
  }
  Users users = train().users();
  std::vector<size_t> per_device(m_->devices().size(), 0);
  for (const ir::Node* ar : nodesWithOp(train(), ir::Op::kAllReduce)) {
    size_t k = ar->numOperands() / m_->devices().size();
    for (size_t r = 0; r < ar->numResults(); ++r) {
      const ir::Node* u = updateUsing(users, ar->result(r));
      if (u == nullptr) continue;
      int d = deviceNumber(*m_, u->device());
      EXPECT_EQ(d, static_cast<int>(r / k)) << "a device updates with its own replica";
      ++per_device[r / k];
      // The reduced value is the sum of this variable's gradients, in the same slot.
      EXPECT_EQ(ar->operand(r)->type(), m_->findVar(updatedVar(*u))->type);
    }
  }
  for (size_t d = 0; d < per_device.size(); ++d)
    EXPECT_EQ(per_device[d], params_.size()) << "device " << d;
  // And every update takes a reduced gradient.
  for (const ir::Node* u : nodesWithOp(train(), ir::Op::kSgdUpdate))
    EXPECT_EQ(u->operand(1)->def()->op(), ir::Op::kAllReduce) << u->describe();
}

TEST_P(CollectivesTest, BucketsFollowTheDdpRule) {
  const Case& c = GetParam();
  auto expected = ddpBuckets(ready_, static_cast<int64_t>(c.first_bucket_mb * kMiB),
                             static_cast<int64_t>(c.bucket_mb * kMiB));
  if (c.devices == 1) expected.clear();  // one device: no buckets at all
  Users users = train().users();
  std::vector<std::vector<std::string>> actual;
  for (const ir::Node* ar : nodesWithOp(train(), ir::Op::kAllReduce)) {
    if (!isGradientBucket(users, *ar)) continue;
    size_t k = ar->numOperands() / m_->devices().size();
    std::vector<std::string> vars;
    for (size_t r = 0; r < k; ++r) {  // device 0's group
      const ir::Node* u = updateUsing(users, ar->result(r));
      vars.push_back(u == nullptr ? "<not a gradient>" : updatedVar(*u));
    }
    actual.push_back(vars);
  }
  EXPECT_EQ(actual.size(), expected.size());
  EXPECT_EQ(actual, expected);
}

TEST_P(CollectivesTest, BucketSitsRightAfterItsLastGradient) {
  const ir::Graph& g = train();
  auto pos = g.positions();
  Users users = g.users();
  for (const ir::Node* ar : nodesWithOp(g, ir::Op::kAllReduce)) {
    if (!isGradientBucket(users, *ar)) continue;
    size_t last = 0;
    for (const ir::Value* v : ar->operands()) last = std::max(last, pos.at(v->def()));
    size_t at = pos.at(ar);
    ASSERT_GT(at, last) << ar->describe();
    // Only other buckets closing at the same gradient may sit in between.
    for (size_t i = last + 1; i < at; ++i)
      EXPECT_EQ(g.nodes()[i]->op(), ir::Op::kAllReduce)
          << ar->describe() << " is not right after its last gradient: " << g.nodes()[i]->describe()
          << " is in between";
  }
}

TEST_P(CollectivesTest, BucketsAreNumberedInOrder) {
  for (const auto& g : m_->graphs()) {
    std::vector<int64_t> numbers, expected;
    for (const ir::Node* ar : nodesWithOp(*g, ir::Op::kAllReduce)) {
      expected.push_back(static_cast<int64_t>(numbers.size()));
      numbers.push_back(ar->intAttr("bucket"));
      EXPECT_EQ(ar->enumAttr("op"), "sum");
      EXPECT_EQ(ar->devicesAttr(), m_->devices());
    }
    EXPECT_EQ(numbers, expected) << "@" << g->name();
  }
}

TEST_P(CollectivesTest, StepInputsAreSplitOverTheDevices) {
  std::vector<int64_t> sizes = evenSplit(kBatch, GetParam().devices);
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph}) {
    const ir::Graph& g = *m_->graph(name);
    std::vector<ir::Node*> inputs = g.inputs();
    ASSERT_EQ(inputs.size(), 2u);
    auto splits = nodesWithOp(g, ir::Op::kSplit);
    ASSERT_EQ(splits.size(), 2u) << "@" << name;
    for (size_t i = 0; i < 2; ++i) {
      const ir::Node& s = *splits[i];
      EXPECT_EQ(s.operand(0)->def(), inputs[i]);
      EXPECT_FALSE(inputs[i]->device().has_value()) << "batch inputs live on the host";
      EXPECT_EQ(inputs[i]->result()->type().shape[0], kBatch);
      EXPECT_EQ(s.intAttr("axis"), 0);
      EXPECT_EQ(s.attrAs<std::vector<int64_t>>("sizes"), sizes);
      EXPECT_EQ(s.devicesAttr(), m_->devices());
      ASSERT_EQ(s.numResults(), sizes.size());
      for (size_t d = 0; d < sizes.size(); ++d) {
        EXPECT_EQ(s.result(d)->type().shape[0], sizes[d]);
        EXPECT_EQ(s.result(d)->device(), m_->devices()[d]);
      }
    }
  }
  // The loss keeps the global divisor on every device, so per-device gradients add up.
  auto losses = nodesWithOp(train(), ir::Op::kSoftmaxCrossEntropy);
  ASSERT_EQ(losses.size(), static_cast<size_t>(GetParam().devices));
  for (const ir::Node* l : losses) {
    EXPECT_EQ(l->intAttr("divisor"), kBatch);
    EXPECT_EQ(l->enumAttr("reduction"), "mean");
  }
}

TEST_P(CollectivesTest, InitBroadcastsRandomValuesOnly) {
  const ir::Graph& init = *m_->graph(ir::kInitGraph);
  size_t devices = m_->devices().size();
  std::map<std::string, std::vector<const ir::Node*>> initializes, broadcasts;
  for (const ir::Node* n : nodesWithOp(init, ir::Op::kInitialize))
    initializes[n->symbolAttr("var")].push_back(n);
  for (const ir::Node* b : nodesWithOp(init, ir::Op::kBroadcast)) {
    const ir::Node* root = b->operand(0)->def();
    ASSERT_EQ(root->op(), ir::Op::kInitialize) << b->describe();
    EXPECT_EQ(deviceNumber(*m_, root->device()), 0) << "drawn on the first device";
    EXPECT_EQ(b->devicesAttr(), m_->devices());
    broadcasts[root->symbolAttr("var")].push_back(b);
  }
  size_t random = 0;
  for (const ir::Var& var : m_->vars()) {
    bool deterministic = var.init.isDeterministic();
    if (!deterministic) ++random;
    if (devices == 1 || deterministic) {
      EXPECT_EQ(broadcasts.count(var.name), 0u) << var.name;
      EXPECT_EQ(initializes[var.name].size(), devices) << "every device computes " << var.name;
    } else {
      EXPECT_EQ(broadcasts[var.name].size(), 1u) << var.name;
      EXPECT_EQ(initializes[var.name].size(), 1u) << "drawn once: " << var.name;
    }
  }
  EXPECT_GT(random, 0u);
  EXPECT_EQ(nodesWithOp(init, ir::Op::kBroadcast).size(), devices == 1 ? 0 : random);
  // Each device stores its own copy: the broadcast result or its own initialize.
  for (const ir::Node* a : nodesWithOp(init, ir::Op::kAssign)) {
    const ir::Value* v = a->operand(0);
    const ir::Node* def = v->def();
    EXPECT_EQ(v->device(), a->device()) << a->describe();
    if (def->op() == ir::Op::kBroadcast) {
      EXPECT_EQ(static_cast<int>(v->index()), deviceNumber(*m_, a->device()));
      EXPECT_EQ(def->operand(0)->def()->symbolAttr("var"), a->symbolAttr("var"));
    } else {
      ASSERT_EQ(def->op(), ir::Op::kInitialize);
      EXPECT_EQ(def->symbolAttr("var"), a->symbolAttr("var"));
    }
  }
  EXPECT_EQ(nodesWithOp(init, ir::Op::kAssign).size(), m_->vars().size() * devices);
}

TEST_P(CollectivesTest, OutputsAreSummedAndDeviceZeroReturnsThem) {
  size_t devices = m_->devices().size();
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph}) {
    const ir::Graph& g = *m_->graph(name);
    ASSERT_EQ(g.outputs().size(), 2u) << "@" << name;
    const ir::Value* loss = g.outputs()[0];
    const ir::Value* correct = g.outputs()[1];
    EXPECT_EQ(correct->type(), (ir::TensorType{ir::DType::kI32, {}}));
    EXPECT_EQ(loss->type(), (ir::TensorType{ir::DType::kF32, {}}));
    for (const ir::Value* out : {loss, correct}) {
      EXPECT_EQ(deviceNumber(*m_, out->device()), 0) << "@" << name;
      if (devices == 1) {
        EXPECT_NE(out->def()->op(), ir::Op::kAllReduce);
        continue;
      }
      const ir::Node& ar = *out->def();
      ASSERT_EQ(ar.op(), ir::Op::kAllReduce) << "@" << name << " returns " << out->name();
      EXPECT_EQ(out->index(), 0) << "device 0's sum";
      ASSERT_EQ(ar.numOperands(), devices);
      ir::Op source = out == correct ? ir::Op::kAccuracy : ir::Op::kSoftmaxCrossEntropy;
      for (size_t d = 0; d < devices; ++d) {
        EXPECT_EQ(ar.operand(d)->def()->op(), source);
        EXPECT_EQ(deviceNumber(*m_, ar.operand(d)->device()), static_cast<int>(d));
      }
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* model : {"lenet", "resnet18"})
    for (int n : {1, 2, 3, 4, 8}) out.push_back({model, n});
  // Small caps: many buckets, several closing at the same node.
  out.push_back({"lenet", 2, 0.05, 0.001, "small_buckets"});
  out.push_back({"resnet18", 3, 2, 0.5, "small_buckets"});
  out.push_back({"resnet18", 2, 0.01, 0.01, "tiny_buckets"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Zoo, CollectivesTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return caseName(info.param); });

TEST(Collectives, ThreeDevicesSplit86_85_85) {
  auto m = buildZooModel("lenet", 256);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff,replicate{devices=3},insert-collectives").ok());
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph})
    for (const ir::Node* s : nodesWithOp(*m->graph(name), ir::Op::kSplit))
      EXPECT_THAT(s->attrAs<std::vector<int64_t>>("sizes"), ElementsAre(86, 85, 85));
}

TEST(Collectives, WeightedSplits) {
  struct W {
    std::string devices;
    std::string weights;
    std::vector<int64_t> sizes;
  };
  // Largest remainder after one sample each: [1,1,1,1000] leaves 252 to share, 0.25 each
  // for the small ones against 0.249 for the big one, so device 0 gets the spare sample.
  for (const W& w : {W{"2", "[3,1]", {192, 64}}, W{"3", "[1,2,1]", {64, 128, 64}},
                     W{"2", "[1,1]", {128, 128}}, W{"4", "[1,1,1,1000]", {2, 1, 1, 252}}}) {
    auto m = buildZooModel("lenet", 256);
    ASSERT_NE(m, nullptr);
    std::string pipeline = absl::StrCat("autodiff,replicate{devices=", w.devices,
                                        ",weights=", w.weights, "},insert-collectives");
    ASSERT_TRUE(runPipeline(*m, pipeline).ok()) << pipeline;
    for (const ir::Node* s : nodesWithOp(*m->graph(ir::kTrainGraph), ir::Op::kSplit))
      EXPECT_THAT(s->attrAs<std::vector<int64_t>>("sizes"), ElementsAreArray(w.sizes)) << pipeline;
  }
}

/// The number of gradient buckets in @train_step.
size_t gradientBuckets(const ir::Module& m) {
  const ir::Graph& g = *m.graph(ir::kTrainGraph);
  Users users = g.users();
  size_t n = 0;
  for (const ir::Node* ar : nodesWithOp(g, ir::Op::kAllReduce)) n += isGradientBucket(users, *ar);
  return n;
}

TEST(Collectives, LargeFirstBucketHoldsEveryGradient) {
  // 1 TiB: far more than LeNet's 0.5 MB of gradients, so one bucket.
  auto m = buildZooModel("lenet", 16);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(
      runPipeline(*m, "autodiff,replicate{devices=2},insert-collectives{first-bucket-mb=1e6}")
          .ok());
  EXPECT_EQ(gradientBuckets(*m), 1u);
}

TEST(Collectives, HugeBucketCapIsRejected) {
  // A cap past 2^63 bytes would wrap around when converted to bytes: it is refused,
  // naming the option.
  auto m = buildZooModel("lenet", 16);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, "autodiff,replicate{devices=2}").ok());
  absl::Status s = runPipeline(*m, "insert-collectives{first-bucket-mb=1e300}");
  EXPECT_EQ(s.message(),
            "pass insert-collectives: option 'first-bucket-mb' must be > 0 and at most 1e9 MiB, "
            "got 1e+300");
  EXPECT_FALSE(runPipeline(*m, "insert-collectives{bucket-mb=inf}").ok());
}

TEST(Collectives, MomentumBuffersAreNotBroadcast) {
  auto m = buildZooModel("lenet", 64);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(
      runPipeline(*m, "autodiff{momentum=0.9},replicate{devices=2},insert-collectives").ok());
  for (const ir::Node* b : nodesWithOp(*m->graph(ir::kInitGraph), ir::Op::kBroadcast)) {
    const ir::Var* var = m->findVar(b->operand(0)->def()->symbolAttr("var"));
    ASSERT_NE(var, nullptr);
    EXPECT_EQ(var->role, ir::VarRole::kParam);
    EXPECT_FALSE(var->init.isDeterministic());
  }
  // Buckets carry gradients only, never the momentum buffers.
  for (const ir::Node* ar : nodesWithOp(*m->graph(ir::kTrainGraph), ir::Op::kAllReduce))
    for (const ir::Value* v : ar->operands())
      EXPECT_NE(v->def()->op(), ir::Op::kParam) << ar->describe();
}

TEST(Collectives, Errors) {
  auto m = buildZooModel("lenet", 16);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(runPipeline(*m, "autodiff,insert-collectives").message(),
            "insert-collectives: the module is not replicated (run replicate first)");
  ASSERT_TRUE(runPipeline(*m, "replicate{devices=2},insert-collectives").ok());
  absl::Status twice = runPipeline(*m, "insert-collectives");
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(twice.message()),
              ::testing::StartsWith("insert-collectives: @init already has collectives ("));
  EXPECT_EQ(passes::parsePipeline("insert-collectives{bucket-mb=0}").status().message(),
            "pass insert-collectives: option 'bucket-mb' must be > 0 and at most 1e9 MiB, got 0");
  EXPECT_EQ(passes::parsePipeline("insert-collectives{first-bucket-mb=-1}").status().message(),
            "pass insert-collectives: option 'first-bucket-mb' must be > 0 and at most 1e9 MiB, "
            "got -1");
}

}  // namespace
}  // namespace tandem::testing
